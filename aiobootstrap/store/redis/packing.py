"""Commands packed in C: hiredis's ``pack_command`` in place of redis-py's asyncio one, written in Python.

redis-py's asyncio connections pack each command argument by argument in
Python: for a write batch's ``PUTS`` call of 30 puts (about 300
arguments) that is about 450 µs of a replica's CPU, against about 50 µs in
hiredis, for the very same bytes (redis-py's synchronous client already
packs with hiredis when it can). So each pool's connection class is given a
``pack_command`` that asks hiredis, and leaves to redis-py's own what
hiredis refuses (a type it does not pack: redis-py's error is the one
raised) or when hiredis is older than its ``pack_command``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["pack_in_c"]

try:
    import hiredis
except ImportError:  # pragma: no cover - the redis extra installs it
    _PACK: Callable[[tuple[Any, ...]], bytes] | None = None
else:
    _PACK = getattr(hiredis, "pack_command", None)


class _PackedInC:
    """A connection class's ``pack_command``, through hiredis."""

    def pack_command(self, *args: Any) -> list[bytes]:
        assert _PACK is not None
        name = args[0]
        # As redis-py does: a command named in several words ("CONFIG GET") goes as several arguments.
        if isinstance(name, str):
            if " " in name:
                args = (*name.encode().split(), *args[1:])
        elif b" " in name:
            args = (*bytes(name).split(), *args[1:])
        try:
            return [_PACK(args)]
        except TypeError:
            return super().pack_command(*args)  # type: ignore[misc, no-any-return]


def pack_in_c(pool: Any) -> None:
    """Make ``pool``'s connections (made from now on) pack their commands with hiredis, when it can."""
    if _PACK is None:
        return
    base = pool.connection_class
    if issubclass(base, _PackedInC):
        return
    pool.connection_class = type(f"PackedInC{base.__name__}", (_PackedInC, base), {})
