"""What the engine plugins read from the environment: the config of every server they start.

Whether they are enabled is ``switch.py``'s. :func:`engine_config` reads the
in-process servers' config the way ``python -m aiobootstrap`` reads its own
(``cli/parser.py``: one parser, one set of checks): each serve option ``--NAME``
is the variable ``AIOBOOTSTRAP_NAME``, dashes as underscores (``--max-wait`` is
``AIOBOOTSTRAP_MAX_WAIT``; a flag's value is ``1`` or ``0``), handed to
``serve``'s parser as that option. ``AIOBOOTSTRAP_STORE`` and
``AIOBOOTSTRAP_AUTH_TOKEN`` are the command line's own variables, read by it;
``AIOBOOTSTRAP_TOKEN_FILE`` is ``--auth-token-file``. ``AIOBOOTSTRAP_NAMESPACE``
(:func:`engine_namespace`) is the plugins' own: the namespace an engine's
servers serve on the address the engine gives them. The options the engine
decides (where each server listens, its logging) and those an engine's
clients could not follow (TLS; a further listener, which every server of one
process would bind) are not read (:data:`NOT_READ`). :func:`variables` lists
every variable read, for the docs' table.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from .._names import DEFAULT_NAMESPACE, check_name
from ..cli.parser import STORE_ENV, TOKEN_ENV, server_config, server_parser
from ..server.config import ServerConfig
from .switch import ENGINE_ENV, switch_word

__all__ = [
    "EXTERNAL_PREFILL_ENV",
    "NAMESPACE_ENV",
    "NOT_READ",
    "PREFIX",
    "RENAMED",
    "Variable",
    "engine_config",
    "engine_namespace",
    "external_prefill",
    "variables",
]

PREFIX = "AIOBOOTSTRAP_"
EXTERNAL_PREFILL_ENV = "AIOBOOTSTRAP_EXTERNAL_PREFILL"
"""``1``: SGLang's prefill instances construct no bootstrap server; an external aiobootstrap serves the address
their ranks register at (``--listen HOST:PORT=NAMESPACE``)."""
NAMESPACE_ENV = "AIOBOOTSTRAP_NAMESPACE"
"""The namespace an engine's servers serve on their unprefixed routes (the engines know no ``/ns/`` prefix)."""
RENAMED = {"auth_token_file": "AIOBOOTSTRAP_TOKEN_FILE"}
"""Options read under another name than the pattern's, by dest."""
NOT_READ = {
    "help": "not a setting",
    "version": "not a setting",
    "host": "the engine chooses where each of its servers listens",
    "port": "the engine chooses where each of its servers listens",
    "log_level": "the engine's logging handles the aiobootstrap logger",
    "log_format": "the engine's logging handles the aiobootstrap logger",
    "tls_cert": "the engines' clients speak plain HTTP to their servers",
    "tls_key": "the engines' clients speak plain HTTP to their servers",
    "listen": "every in-process server of an engine's process would bind the same port",
    "store": f"read as {STORE_ENV}, by the command line's own reading",
}
"""``serve``'s options the plugins do not read, by dest, and why."""


@dataclass(frozen=True, slots=True)
class Variable:
    """A variable the plugins read: its name, the ``serve`` option it stands for (if any), what it does."""

    name: str
    option: str
    help: str


def _read(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    """Each option of ``parser`` the plugins read, with its variable's name."""
    for action in parser._actions:
        if action.option_strings and action.dest not in NOT_READ:
            yield RENAMED.get(action.dest, PREFIX + action.dest.upper()), action


def variables() -> list[Variable]:
    """Every variable the plugins read: the switch and the command line's two, then ``serve``'s options."""
    found = [
        Variable(ENGINE_ENV, "", "1 enables the plugins; 0 keeps them off, whatever else is set"),
        Variable(STORE_ENV, "--store", "where records live; set alone, it enables the plugins"),
        Variable(TOKEN_ENV, "", "one token that every route but the probes needs"),
        Variable(
            NAMESPACE_ENV, "", "the namespace the engine's servers serve where the engine has them listen"
        ),
        Variable(
            EXTERNAL_PREFILL_ENV,
            "",
            "1: SGLang's prefill instances bind no bootstrap server, for an external one listening there",
        ),
    ]
    for name, action in _read(server_parser()):
        found.append(Variable(name, action.option_strings[-1], (action.help or "") % vars(action)))
    return found


def engine_config(environ: Mapping[str, str]) -> ServerConfig:
    """The config of every in-process server the plugins start, from ``environ``'s ``AIOBOOTSTRAP_*``
    variables; a one-line ``ValueError``, naming the variable where one is at fault."""
    parser = server_parser()
    parser.exit_on_error = False  # a bad value is an ArgumentError here, told by its variable below
    argv: list[str] = []
    for name, action in _read(parser):
        value = environ.get(name)
        if value is None:
            continue
        flag = action.option_strings[-1]
        if action.nargs == 0:  # a flag: on sets it, off leaves it out
            argv += [flag] if switch_word(name, value) else []
        else:
            argv.append(f"{flag}={value}")
    try:
        args = parser.parse_args(argv)
    except argparse.ArgumentError as exc:
        raise ValueError(f"{_variable_of(parser, exc.argument_name)}: {exc.message}") from None
    try:
        return server_config(args, environ)
    except ValueError as exc:
        raise ValueError(f"the {PREFIX}* settings: {exc}") from None


def _variable_of(parser: argparse.ArgumentParser, option: str | None) -> str:
    """The variable that stands for ``option`` (argparse names an option by its strings, joined by ``/``)."""
    flags = (option or "").split("/")
    for name, action in _read(parser):
        if any(flag in flags for flag in action.option_strings):
            return name
    return f"the {PREFIX}* settings"


def engine_namespace(environ: Mapping[str, str]) -> str | None:
    """``AIOBOOTSTRAP_NAMESPACE``: the namespace the engines' servers serve, ``None`` for the default one; a
    one-line ``ValueError`` for a name the server would refuse."""
    name = environ.get(NAMESPACE_ENV, "").strip()
    if not name or name == DEFAULT_NAMESPACE:
        return None
    try:
        return check_name(name, "namespace")
    except ValueError as exc:
        raise ValueError(f"{NAMESPACE_ENV}: {exc}") from None


def external_prefill(environ: Mapping[str, str]) -> bool:
    """``AIOBOOTSTRAP_EXTERNAL_PREFILL``: whether an external server serves SGLang's prefill side (``1``/``0``)."""
    value = environ.get(EXTERNAL_PREFILL_ENV, "")
    return bool(value.strip()) and switch_word(EXTERNAL_PREFILL_ENV, value)
