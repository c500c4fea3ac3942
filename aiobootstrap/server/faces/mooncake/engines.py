"""A namespace's Mooncake engines, read from its metadata keys: each engine's ``rpc_meta`` (its RPC
address) and ``ram`` (its segment descriptor) side by side, by engine name (``GET /mooncake``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ....exceptions import BootstrapError
from ....store import Key, Record
from ....wire.metadata import decode_value

__all__ = ["engines_of"]

_KINDS = ("rpc_meta/", "ram/")


def _parsed(record: Record) -> Any:
    try:
        return json.loads(decode_value(record.value))
    except (ValueError, BootstrapError):
        return None  # not JSON: shown by its key alone


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
            value = _parsed(record)
            entry["version"] = max(entry.get("version", 0), record.version)
            entry["age"] = round(max(0.0, now - record.registered_at), 3)
            if marker == "rpc_meta/":
                entry["rpc"] = value if isinstance(value, dict) else None
                if failures is not None:
                    entry["probe_failures"] = failures(record.key)
            else:
                entry["segment"] = True
                if isinstance(value, dict):
                    buffers = value.get("buffers")
                    entry["buffers"] = len(buffers) if isinstance(buffers, list) else None
                    entry["protocol"] = value.get("protocol")
            break
    return [engines[key] for key in sorted(engines)]
