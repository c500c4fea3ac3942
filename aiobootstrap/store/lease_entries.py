"""Leases in the file store's journal: their entries, replayed into a lease table, or taken from it.

Three ops beside ``base``, ``put`` and ``del`` (``store.journal`` has the format)::

    {"op":"lease","id":"9f2c...","ttl":10}                 a lease granted (``ns`` when not default)
    {"op":"end","id":"9f2c..."}                            revoked or expired, once its records are deleted
    {"op":"hold","id":"9f2c...","kind":"urls","rank":0,"member":"http://e1"}
                                                           a set member moved to a lease (``id`` null: off
                                                           every lease) without a change of the list

and two fields of a put: ``"lease": ID``, the lease holding a per-rank
record, and for a set record ``"leases": {member: ID}``, the lease of each
member on one. A put or a delete without them takes its record off any
lease, as the live write did.

Replay grants each lease again under its own id and attaches what the lines
say; then :meth:`~.leases.LeaseTable.renew_all` gives every lease its full
TTL from the restart (SPEC section 9: no worker is expired by the outage).
A lease's ``end`` is written after its records' deletions: a crash between
them brings back a lease with nothing on it, which its holder keeps alive
or which expires again, never a record on no lease. A compacted journal
writes one ``lease`` line per live lease before the records.
"""

from __future__ import annotations

from typing import Any

from .._names import DEFAULT_NAMESPACE
from .leases import Lease, LeaseTable
from .members import members_of
from .records import Key, Record

__all__ = [
    "LEASE_OPS",
    "check_lease_entry",
    "end_entry",
    "grant_entry",
    "hold_fields",
    "lease_lines",
    "replay_lease_entry",
    "replay_put_leases",
]

LEASE_OPS = ("lease", "end", "hold")


def check_lease_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A lease op's entry, checked as ``journal.parse_line`` checks the others (a ``hold``'s rank or name is
    checked there); ``ValueError`` saying why."""
    lease = entry.get("id")
    if not isinstance(lease, str) and not (entry["op"] == "hold" and lease is None):
        raise ValueError("its lease id is not a string")
    ttl = entry.get("ttl", 1)
    if not isinstance(ttl, int | float) or isinstance(ttl, bool) or not ttl > 0:
        raise ValueError("its ttl is not a positive number")
    if entry["op"] == "hold" and not isinstance(entry.get("member"), str):
        raise ValueError("it holds no record")
    return entry


def grant_entry(lease: Lease) -> dict[str, Any]:
    entry: dict[str, Any] = {"op": "lease", "id": lease.id}
    if lease.namespace != DEFAULT_NAMESPACE:
        entry["ns"] = lease.namespace
    entry["ttl"] = lease.ttl
    return entry


def end_entry(lease: Lease) -> dict[str, Any]:
    return {"op": "end", "id": lease.id}


def hold_fields(lease: Lease | None, member: str) -> dict[str, Any]:
    """What a ``hold`` line adds to a key's fields (``entries._entry`` writes those)."""
    return {"id": None if lease is None else lease.id, "member": member}


def member_leases(table: LeaseTable, key: Key, members: list[str]) -> dict[str, str]:
    """Each member of a set record held by a live lease, and that lease's id."""
    found = {}
    for member in members:
        held = table.lease_of((key, member))
        if held is not None:
            found[member] = held[0]
    return found


def lease_lines(table: LeaseTable) -> list[dict[str, Any]]:
    """The ``lease`` entries of every live lease (what a compacted journal starts with)."""
    return [grant_entry(lease) for lease in table.leases()]


def record_fields(table: LeaseTable, record: Record) -> dict[str, Any]:
    """What a put line of ``record`` says of its leases, as the table has them now.

    The targets tell a per-rank record from a set record: a lease holds the one as its key, the other's
    members each as its key and the member.
    """
    owner = table.lease_of((record.key, None))
    if owner is not None:
        return {"lease": owner[0]}
    held = member_leases(table, record.key, _members(record.value))
    return {"leases": held} if held else {}


def _members(value: dict[str, Any] | None) -> list[str]:
    """The members of a set record's value (any other value: the strings of a ``members`` list it may hold,
    which no lease holds as members)."""
    return [member for member in members_of(value) if isinstance(member, str)]


def replay_lease_entry(entry: dict[str, Any], key: Key | None, table: LeaseTable) -> None:
    """Apply a ``lease``, ``end`` or ``hold`` entry (``key``: a hold's record) to ``table``."""
    op, lease_id = entry["op"], entry.get("id")
    if op == "lease":
        table.grant(entry.get("ns", DEFAULT_NAMESPACE), float(entry["ttl"]), lease_id, limit=False)
    elif op == "end":
        lease = table.live(lease_id)
        if lease is not None:
            table.forget(lease)
    elif key is not None:
        table.attach((key, entry["member"]), table.live(lease_id))


def replay_put_leases(
    entry: dict[str, Any], record: Record, before: Record | None, table: LeaseTable
) -> None:
    """Attach what a put line says, as the live put did: its record (``lease``), or each member of a set
    record (``leases``); a line with neither takes the record, and every member, off any lease."""
    key = record.key
    lease_id = entry.get("lease")
    table.attach((key, None), table.live(lease_id) if isinstance(lease_id, str) else None)
    held = entry.get("leases")
    held = held if isinstance(held, dict) else {}
    members = _members(record.value)
    if before is not None:
        kept = set(members)
        for member in _members(before.value):
            if member not in kept:
                table.attach((key, member), None)
    for member in members:
        lease_id = held.get(member)
        table.attach((key, member), table.live(lease_id) if isinstance(lease_id, str) else None)
