"""The JSON codec of the wire and of every store: strict, and the same bytes with or without orjson.

orjson (the ``fast`` extra) is used when it is installed and the standard
library otherwise; either way ``NaN`` and ``Infinity`` are refused, integers
of any size survive, and whatever one refuses the other handles.
"""

from __future__ import annotations

import json
import math
from typing import Any

try:  # optional (the `fast` extra): the same JSON, several times faster; see docs/benchmarks.md
    import orjson
except ImportError:
    orjson = None  # type: ignore[assignment]

__all__ = ["dumps", "loads", "stdlib_dumps"]


# Every digit to "0", everything else to " ": a run of 19 digits becomes a
# plain substring search, ten times faster than a regex on a 20 MB body.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_NUMBER = b"0" * 19


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    # 1e400 is JSON, but as a float it is infinity, which a reply can only
    # carry as null (orjson) or the invalid Infinity (stdlib): refuse it.
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is out of range")
    return value


def loads(data: bytes | str) -> Any:
    """Parse strict JSON: ``NaN`` and ``Infinity`` are refused, as RFC 8259 does."""
    # orjson is strict already, but reads integers past 64 bits as floats, and
    # a 19-digit run is the shortest that can be one: leave those to the stdlib,
    # as everything orjson refuses (lone surrogates, a BOM, 1e400).
    if orjson is not None and isinstance(data, bytes) and _LONG_NUMBER not in data.translate(_DIGITS_ONLY):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data, parse_constant=_reject_constant, parse_float=_finite_float)


def dumps(obj: Any) -> bytes:
    if orjson is not None:
        try:
            # A right-sized copy: orjson's bytes keep its working buffer, 4 KB
            # even for a 200-byte reply, and the registry keeps every reply.
            return memoryview(orjson.dumps(obj)).tobytes()
        except TypeError:  # what orjson refuses (lone surrogates, huge ints, int keys): the stdlib's job
            pass
    return stdlib_dumps(obj)


def stdlib_dumps(obj: Any) -> bytes:
    # ensure_ascii keeps any string a client sent (lone surrogates included)
    # encodable, so a reply can never fail to serialise.
    return json.dumps(obj, separators=(",", ":")).encode("ascii")
