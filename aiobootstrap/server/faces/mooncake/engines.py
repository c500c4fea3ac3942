"""A namespace's Mooncake engines, read from its metadata keys: each engine's ``rpc_meta`` (its RPC
address) and ``ram`` (its segment descriptor) side by side, by engine name (``GET /mooncake``).

Never a big value parsed again: an ``rpc_meta`` value is read only when it is
at most ``RPC_META_LIMIT`` characters (an engine's is ~60), and a segment's
summary (its buffers, its protocol) is read once per version, from a value of
at most :data:`SEGMENT_LIMIT` characters, and kept (:data:`_SUMMARIES` of them,
the oldest dropped first); a longer value is listed by its key alone.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ....store import Key, Record
from .rpc_probe import rpc_value

__all__ = ["SEGMENT_LIMIT", "engines_of"]

_KINDS = ("rpc_meta/", "ram/")
SEGMENT_LIMIT = 1 << 20
"""The longest segment descriptor (characters) a listing reads: one of hundreds of buffers is ~100 KiB."""
_SUMMARIES = 65536
"""The segments' summaries kept, by key, version and time of the write (a few hundred bytes each)."""
_PROTOCOL_SHOWN = 64

_summaries: OrderedDict[tuple[Key, int, float], tuple[int | None, str | None]] = OrderedDict()


def _read_segment(value: dict[str, Any]) -> tuple[int | None, str | None]:
    text = value.get("text")
    if not isinstance(text, str) or len(text) > SEGMENT_LIMIT:
        return None, None  # not UTF-8 (so not an engine's JSON), or too long to read on the loop
    try:
        parsed = json.loads(text)
    except ValueError:
        return None, None
    if not isinstance(parsed, dict):
        return None, None
    buffers, protocol = parsed.get("buffers"), parsed.get("protocol")
    return (
        len(buffers) if isinstance(buffers, list) else None,
        protocol[:_PROTOCOL_SHOWN] if isinstance(protocol, str) else None,
    )


def segment_summary(record: Record) -> tuple[int | None, str | None]:
    """A segment's buffers (their count) and protocol, read once per version of its key."""
    stamp = (record.key, record.version, record.registered_at)
    summary = _summaries.get(stamp)
    if summary is None:
        summary = _summaries[stamp] = _read_segment(record.value)
        if len(_summaries) > _SUMMARIES:
            _summaries.popitem(last=False)
    else:
        _summaries.move_to_end(stamp)
    return summary


def engines_of(
    records: Sequence[Record], *, now: float, failures: Callable[[Key], int] | None
) -> list[dict[str, Any]]:
    """One entry per engine name that has an ``rpc_meta`` or a ``ram`` key, in order of name."""
    engines: dict[str, dict[str, Any]] = {}
    for record in records:
        name = record.name or ""
        for marker in _KINDS:
            head, found, engine = name.rpartition(marker)
            if not found or not engine:
                continue
            entry = engines.setdefault(
                head + engine,
                {"name": engine, "rpc": None, "segment": False, "buffers": None, "protocol": None},
            )
            entry["version"] = max(entry.get("version", 0), record.version)
            entry["age"] = round(max(0.0, now - record.registered_at), 3)
            if marker == "rpc_meta/":
                entry["rpc"] = rpc_value(record.value)
                if failures is not None:
                    entry["probe_failures"] = failures(record.key)
            else:
                entry["segment"] = True
                entry["buffers"], entry["protocol"] = segment_summary(record)
            break
    return [engines[key] for key in sorted(engines)]
