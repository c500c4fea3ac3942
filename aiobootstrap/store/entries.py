"""The file store's records as journal entries, and a journal replayed into tables, or taken from them.

An entry is the JSON object of one journal line (``store.journal`` has the
format): a put carries the record whole, a delete its key and version, and
``ns``, ``kind`` and ``role`` are left out at their defaults (the kind's is
``_names.JOURNAL_DEFAULT_KIND``), so the commonest line stays short; a named record's line has ``name`` in place
of ``rank``. A snapshot of the tables (what compaction
writes) is a ``base`` line, holding the highest version taken and the
incarnation, then one put a live record.

Replaying follows the rules a live change follows, because it applies each
line through :class:`~aiobootstrap.store.tables.Tables`: a put replaces an
older version of its key, a delete removes an older one, and every
namespace's versions go on above the highest in the file (a ``base`` line,
first after a compaction, raises the floor to what it holds). A line whose
rank is past 18 digits, written by an older version, is not loaded (no route
could read or delete it), but its version stays taken; the load says how
many it skipped, and of the lines it could not read, in one warning each.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._names import DEFAULT_NAMESPACE, DEFAULT_ROLE, JOURNAL_DEFAULT_KIND
from .._ranks import MAX_RANK
from .journal import encode_line
from .lease_entries import (
    LEASE_OPS,
    hold_fields,
    lease_lines,
    record_fields,
    replay_lease_entry,
    replay_put_leases,
)
from .leases import Lease, LeaseTable
from .records import NO_RANK, Key, Record
from .tables import Tables

__all__ = ["Replayed", "delete_entry", "hold_entry", "put_entry", "replay", "snapshot"]

log = logging.getLogger("aiobootstrap")

_WARN_LINES = 3
"""How many unreadable lines a load names one by one before it only counts them."""


def _entry(op: str, key: Key, version: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"op": op}
    if key.namespace != DEFAULT_NAMESPACE:
        entry["ns"] = key.namespace
    if key.kind != JOURNAL_DEFAULT_KIND:
        entry["kind"] = key.kind
    if key.role != DEFAULT_ROLE:
        entry["role"] = key.role
    if key.name is None:
        entry["rank"] = key.rank
    else:
        entry["name"] = key.name
    entry["version"] = version
    return entry


def put_entry(record: Record) -> dict[str, Any]:
    """The entry of a put of ``record``."""
    entry = _entry("put", record.key, record.version)
    entry["at"] = record.registered_at
    entry["value"] = record.value
    return entry


def delete_entry(key: Key, version: int) -> dict[str, Any]:
    """The entry of a deletion of ``key`` that took ``version``."""
    return _entry("del", key, version)


def hold_entry(key: Key, lease: Lease | None, member: str) -> dict[str, Any]:
    """The entry of a set member moved onto ``lease`` (or off every lease) with no change of its value."""
    entry = _entry("hold", key, 0)
    del entry["version"]
    entry.update(hold_fields(lease, member))
    return entry


def snapshot(
    tables: Tables, incarnation: str, leases: LeaseTable | None = None
) -> tuple[list[bytes], dict[Key, int]]:
    """What a compacted journal holds: a ``base`` line, a ``lease`` line a live lease, then a put line a
    live record (naming its lease); and each put line's size."""
    lines = [encode_line({"op": "base", "version": tables.high, "inc": incarnation})]
    if leases is not None:
        lines.extend(encode_line(entry) for entry in lease_lines(leases))
    sizes: dict[Key, int] = {}
    for record in tables.all_records():
        entry = put_entry(record)
        if leases is not None:
            entry.update(record_fields(leases, record))
        line = encode_line(entry)
        sizes[record.key] = len(line)
        lines.append(line)
    return lines, sizes


def _key_of(entry: dict[str, Any]) -> Key:
    namespace, kind = entry.get("ns", DEFAULT_NAMESPACE), entry.get("kind", JOURNAL_DEFAULT_KIND)
    role = entry.get("role", DEFAULT_ROLE)
    name = entry.get("name")
    if name is not None:
        return Key(namespace, kind, role, NO_RANK, name)
    return Key(namespace, kind, role, entry["rank"])


@dataclass(slots=True)
class Replayed:
    """What a replay found beside the records it applied."""

    incarnation: str = ""
    """The incarnation the journal's ``base`` line names; ``""`` when none does."""
    live_bytes: dict[Key, int] = field(default_factory=dict)
    """Each live record's line length."""
    skipped_ranks: int = 0
    """Registrations of ranks past 18 digits left out."""


def replay(
    entries: Sequence[tuple[dict[str, Any], int]],
    problems: Sequence[str],
    tables: Tables,
    path: str,
    leases: LeaseTable | None = None,
) -> Replayed:
    """Apply a journal's ``entries`` (each with its line's size) to ``tables`` and ``leases``; warn of
    what was skipped."""
    found = Replayed()
    live_bytes = found.live_bytes
    beyond: dict[Key, int] = {}  # the records of ranks past 18 digits the journal holds
    for entry, size in entries:
        op = entry["op"]
        if op == "base":
            tables.raise_floor(entry["version"])
            found.incarnation = entry.get("inc", found.incarnation)
        elif op in LEASE_OPS:
            if leases is not None:
                replay_lease_entry(entry, _key_of(entry) if op == "hold" else None, leases)
        elif entry.get("rank", 0) > MAX_RANK:
            # Written by an older version: no route can read or delete it, so
            # it is not loaded (nor counted under max_ranks); its version stays taken.
            key = _key_of(entry)
            tables.note_version(key.namespace, entry["version"])
            if op == "put":
                beyond[key] = entry["rank"]
            else:
                beyond.pop(key, None)
        elif op == "put":
            key = _key_of(entry)
            record = Record(key, entry["value"], entry["version"], float(entry["at"]))
            before = tables.get(key)
            tables.apply_put(record)
            if tables.get(key) is record:
                live_bytes[key] = size
                if leases is not None:
                    replay_put_leases(entry, record, before, leases)
        else:
            key = _key_of(entry)
            if tables.apply_delete(key, entry["version"]) is not None:
                live_bytes.pop(key, None)
                if leases is not None:
                    leases.attach((key, None), None)
    if problems:
        shown = "; ".join(problems[:_WARN_LINES])
        more = f" and {len(problems) - _WARN_LINES} more" if len(problems) > _WARN_LINES else ""
        log.warning(
            "state file %s: skipped %d unreadable line(s): %s%s; loaded the rest",
            path,
            len(problems),
            shown,
            more,
        )
    found.skipped_ranks = len(beyond)
    if beyond:
        shown = ", ".join(str(rank)[:24] for rank in list(beyond.values())[:_WARN_LINES])
        more = f" and {len(beyond) - _WARN_LINES} more" if len(beyond) > _WARN_LINES else ""
        log.warning(
            "state file %s: skipped %d registration(s) of ranks past %d digits, which no route can "
            "read or delete (written by an older version): %s%s; they leave the file at its next compaction",
            path,
            len(beyond),
            len(str(MAX_RANK)),
            shown,
            more,
        )
    return found
