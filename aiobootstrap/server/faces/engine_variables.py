"""What the faces' settings share: an engine's environment variable read as a number of seconds and an option
whose default it sets, or as a drop-in's default port.

A face's settings (``faces/<name>/settings.py``) read the variables of the
engine it serves, where the engines' own servers read them, so that a
deployment tuned for those servers keeps its settings; an option always wins
over its variable. This module imports no aiohttp: the command line reads the
faces' options before it binds its port and loads the server.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping

__all__ = ["add_seconds_option", "check_seconds", "port_variable", "seconds_variables"]


def seconds_variables(environ: Mapping[str, str], variables: Mapping[str, str]) -> dict[str, float]:
    """Each field of ``variables`` (field name to variable) whose variable ``environ`` sets, as a number
    of seconds; set but empty means unset; a value that is not a number is a one-line ``ValueError``
    naming the variable."""
    values = {}
    for field_name, variable in variables.items():
        text = environ.get(variable, "").strip()
        if text:
            try:
                values[field_name] = float(text)
            except ValueError:
                raise ValueError(f"{variable} must be a number of seconds, not {text!r}") from None
    return values


def add_seconds_option(
    parser: argparse.ArgumentParser, field_name: str, help_text: str, default: float, variable: str
) -> None:
    """``--FIELD-NAME SECONDS``, whose default is ``variable``'s, else ``default``: parsed as ``None``
    when not given, so that the settings' ``from_arguments`` can tell an option from its variable."""
    parser.add_argument(
        "--" + field_name.replace("_", "-"),
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"{help_text} (or set {variable}; default: {default:g})",
    )


def check_seconds(value: float, what: str, *, zero: bool) -> None:
    """A ``ValueError`` unless ``value`` is a finite number of seconds, above 0 (or 0 too, with ``zero``)."""
    if zero and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{what} must be a non-negative number of seconds, not {value}")
    if not zero and not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} must be a positive number of seconds, not {value}")


def port_variable(environ: Mapping[str, str], variable: str, default: int) -> int:
    """The TCP port ``variable`` sets in ``environ`` (a drop-in's default port, as its engine reads it), else
    ``default``; set but empty means unset; anything but a port number is a one-line ``ValueError`` naming
    the variable."""
    text = environ.get(variable, "").strip()
    if not text:
        return default
    if not (text.isascii() and text.isdecimal()) or not 0 <= int(text) <= 65535:
        raise ValueError(f"{variable} must be a port number from 0 to 65535, not {text!r}")
    return int(text)
