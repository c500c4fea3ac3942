"""Whether the engine plugins are enabled: installed is not enabled.

The engines call their plugins in every process they start, whether an
operator asked for aiobootstrap or not, so this module imports nothing of the
package: a process without an aiobootstrap setting loads it and leaves.
``AIOBOOTSTRAP_ENGINE=1`` enables the plugins; ``AIOBOOTSTRAP_STORE=URL`` alone
does too (every in-process server is then a replica of that store), unless
``AIOBOOTSTRAP_ENGINE=0``. No other ``AIOBOOTSTRAP_*`` variable enables them:
``AIOBOOTSTRAP_AUTH_TOKEN``, for one, is the tools' too.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ENGINE_ENV", "OFF", "ON", "STORE_ENV", "enabled", "switch_word"]

ENGINE_ENV = "AIOBOOTSTRAP_ENGINE"
"""``1`` enables the plugins; ``0`` keeps them off, ``AIOBOOTSTRAP_STORE`` or not."""
STORE_ENV = "AIOBOOTSTRAP_STORE"
"""The command line's variable for ``--store`` (``cli.parser.STORE_ENV``, named here to import nothing)."""
ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")


def switch_word(name: str, value: str) -> bool:
    """A variable that is on or off (``1``/``0``, ``true``/``false``, ...); ``ValueError`` for another word."""
    word = value.strip().lower()
    if word not in ON + OFF:
        raise ValueError(f"{name} must be 1 (on) or 0 (off), not {value[:40]!r}")
    return word in ON


def enabled(environ: Mapping[str, str]) -> bool:
    """Whether the plugins put aiobootstrap's servers in place of the engine's; ``ValueError`` for an
    ``AIOBOOTSTRAP_ENGINE`` that is neither on nor off (an empty one says nothing)."""
    switch = environ.get(ENGINE_ENV, "")
    if switch.strip():
        return switch_word(ENGINE_ENV, switch)
    return bool(environ.get(STORE_ENV, "").strip())
