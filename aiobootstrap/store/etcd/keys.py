"""The etcd store's key schema, and how a record, a namespace and a change are kept in values.

Every key starts with the prefix ``P/`` (``?prefix=NAME``, default
``aiobootstrap``), so two registries share one cluster without meeting.
Names in keys are percent-quoted (``/`` and ``%`` never appear raw), so a
key splits back into its parts exactly:

========================  ====================================================
``P/boot``                the incarnation (the boot id), made once, put-if-absent
``P/g``                   ``{"n": namespaces holding records, "f": floor, "l": leases, "L": {NS: leases}}``
``P/m/NS``                a namespace holding records: ``{"v": version, "t": {TABLE: records}}``
``P/r/NS/KIND/ROLE/AT``   a record (``AT``: the rank, or ``:`` and the quoted name)
``P/c``                   the last transaction's changes: the change feed (watched)
``P/d/LEASE``             a lease's marker, on the etcd lease: its deletion is the lease's end (watched)
``P/k/LEASE``             a lease's account: ``{"ns": namespace, "ttl": seconds}``
``P/h/LEASE/NS/KIND/ROLE/AT[/MEMBER]``  a record, or a set record's member, that the lease holds
========================  ====================================================

``P/c`` and ``P/d/`` sit side by side (``c`` < ``d`` < ``e``), so one watch
of the range ``[P/c, P/e)`` hears both, in revision order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from ... import _json
from ..records import NO_RANK, Key, Record

__all__ = [
    "Global",
    "Keys",
    "Meta",
    "StoredRecord",
    "Target",
    "at_of",
    "decode_changes",
    "encode_changes",
    "key_of",
    "table_of",
]

NAMED = ":"
"""The first character of a named record's ``AT``: a rank's is all digits."""


def _q(text: str) -> str:
    return quote(text, safe="")


def at_of(key: Key) -> str:
    """A key's last part: its rank, or ``:`` and its quoted name."""
    return str(key.rank) if key.name is None else NAMED + _q(key.name)


def key_of(namespace: str, kind: str, role: str, at: str) -> Key:
    if at.startswith(NAMED):
        return Key(namespace, kind, role, NO_RANK, unquote(at[1:]))
    return Key(namespace, kind, role, int(at))


def table_of(kind: str, role: str) -> str:
    """A table's name in a namespace's ``t``."""
    return f"{_q(kind)}/{_q(role)}"


Target = tuple[Key, str | None]
"""What a lease holds: a record's key, and a set record's member (``None``: the record)."""


class Keys:
    """The keys of one prefix."""

    def __init__(self, prefix: str) -> None:
        base = prefix.encode() + b"/"
        self.base = base
        self.boot = base + b"boot"
        self.globals = base + b"g"
        self.changes = base + b"c"
        self.watched = (base + b"c", base + b"e")
        self.metas = base + b"m/"
        self.records = base + b"r/"
        self.markers = base + b"d/"
        self.accounts = base + b"k/"
        self.holds = base + b"h/"

    def meta(self, namespace: str) -> bytes:
        return self.metas + _q(namespace).encode()

    def namespace_of(self, meta_key: bytes) -> str:
        return unquote(meta_key[len(self.metas) :].decode())

    def table(self, namespace: str, kind: str, role: str) -> bytes:
        """The prefix of one table's records."""
        return self.records + f"{_q(namespace)}/{table_of(kind, role)}/".encode()

    def record(self, key: Key) -> bytes:
        return self.table(key.namespace, key.kind, key.role) + at_of(key).encode()

    def at_in(self, table: bytes, record_key: bytes) -> str:
        return record_key[len(table) :].decode()

    def marker(self, lease: str) -> bytes:
        return self.markers + lease.encode()

    def account(self, lease: str) -> bytes:
        return self.accounts + lease.encode()

    def lease_of(self, marker_key: bytes) -> str:
        return marker_key[len(self.markers) :].decode()

    def held_by(self, lease: str) -> bytes:
        return self.holds + lease.encode() + b"/"

    def hold(self, lease: str, target: Target) -> bytes:
        key, member = target
        parts = [_q(key.namespace), _q(key.kind), _q(key.role), at_of(key)]
        if member is not None:
            parts.append(_q(member))
        return self.held_by(lease) + "/".join(parts).encode()

    def target_of(self, lease: str, hold_key: bytes) -> Target:
        parts = hold_key[len(self.held_by(lease)) :].decode().split("/")
        key = key_of(unquote(parts[0]), unquote(parts[1]), unquote(parts[2]), parts[3])
        return key, unquote(parts[4]) if len(parts) > 4 else None


@dataclass(slots=True)
class Global:
    """What the whole registry counts (``P/g``)."""

    namespaces: int = 0
    floor: int = 0
    leases: int = 0
    mod: int = 0
    leases_in: dict[str, int] = field(default_factory=dict)
    """Leases held, by namespace (``"L"``): each namespace's share of ``--max-leases``."""

    @classmethod
    def of(cls, value: bytes | None, mod: int) -> Global:
        if not value:
            return cls(mod=mod)
        data = _json.loads(value)
        counts = {str(k): int(v) for k, v in data.get("L", {}).items()}
        return cls(int(data["n"]), int(data["f"]), int(data["l"]), mod, counts)

    def encode(self) -> bytes:
        return _json.dumps({"n": self.namespaces, "f": self.floor, "l": self.leases, "L": self.leases_in})

    def __copy__(self) -> Global:
        return Global(self.namespaces, self.floor, self.leases, self.mod, dict(self.leases_in))

    def lease_ended(self, namespace: str) -> None:
        """One lease of ``namespace`` fewer."""
        self.leases = max(0, self.leases - 1)
        left = self.leases_in.pop(namespace, 0) - 1
        if left > 0:
            self.leases_in[namespace] = left


@dataclass(slots=True)
class Meta:
    """A namespace holding records (``P/m/NS``): its version and each table's record count."""

    version: int
    tables: dict[str, int] = field(default_factory=dict)
    mod: int = 0
    """The revision it was read at (0: the namespace holds nothing)."""

    @classmethod
    def of(cls, value: bytes | None, mod: int, floor: int) -> Meta:
        if not value:
            return cls(floor)
        data = _json.loads(value)
        return cls(int(data["v"]), {str(k): int(v) for k, v in data["t"].items()}, mod)

    def encode(self) -> bytes:
        return _json.dumps({"v": self.version, "t": self.tables})

    @property
    def records(self) -> int:
        return sum(self.tables.values())

    def roles(self, kind: str) -> int:
        start = _q(kind) + "/"
        return sum(1 for table, count in self.tables.items() if count and table.startswith(start))


@dataclass(slots=True)
class StoredRecord:
    """A record as kept: its value, version, time, and the leases holding it or its members."""

    value: dict[str, Any]
    version: int
    registered_at: float
    lease: str | None = None
    members: dict[str, str] = field(default_factory=dict)
    """A set record's members held by a lease, and which."""

    @classmethod
    def of(cls, blob: bytes) -> StoredRecord:
        data = _json.loads(blob)
        return cls(data["d"], int(data["v"]), float(data["t"]), data.get("l"), data.get("m") or {})

    def encode(self) -> bytes:
        data: dict[str, Any] = {"v": self.version, "t": self.registered_at, "d": self.value}
        if self.lease:
            data["l"] = self.lease
        if self.members:
            data["m"] = self.members
        return _json.dumps(data)

    def record(self, key: Key) -> Record:
        return Record(key, self.value, self.version, self.registered_at)

    def holder(self, member: str | None) -> str | None:
        return self.lease if member is None else self.members.get(member)


def encode_changes(namespace: str, changes: list[tuple[Key, int, bool, str | None]]) -> bytes:
    """The value of ``P/c``: one transaction's changes, for the feed."""
    rows = [
        [key.kind, key.role, at_of(key), version, 1 if deleted else 0, member]
        for key, version, deleted, member in changes
    ]
    return _json.dumps({"n": namespace, "c": rows})


def decode_changes(blob: bytes) -> tuple[str, list[tuple[Key, int, bool, str | None]]]:
    data = _json.loads(blob)
    namespace = data["n"]
    return namespace, [
        (key_of(namespace, kind, role, at), int(version), bool(deleted), member)
        for kind, role, at, version, deleted, member in data["c"]
    ]
