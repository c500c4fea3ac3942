"""One transaction of a namespace's writes: the state they read, and the plan they fill.

Every write of a namespace (a put, a delete, a member's change, a lease's
records released) is decided on a :class:`State` (the namespace's
``P/m/NS``: its version and its tables' counts, ``P/g``, and the keys the
write reads) into a :class:`Plan` (the operations, the changes with their
versions, the comparisons). ``namespaces`` commits a plan in one etcd
transaction that also rewrites ``P/m/NS`` and compares that key's revision
with the one read: so the writes of one namespace are serialized by etcd,
on every replica, and the version counter, the limits (each table's
count, the roles, and ``P/g``'s namespace count, compared too when a write
touches it) and a ``put_if``'s comparison are atomic with the write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..limits import StoreLimits, too_many_namespaces, too_many_roles
from ..records import Key
from . import messages as m
from .keys import Global, Keys, Meta, StoredRecord, table_of

__all__ = ["Plan", "State"]


@dataclass(slots=True)
class State:
    """A namespace as one read saw it, with the extra keys and ranges the write asked for."""

    boot_mod: int
    glob: Global
    meta: Meta
    found: dict[bytes, m.Found | None]
    ranges: dict[bytes, list[m.Found]]

    def record(self, keys: Keys, key: Key) -> StoredRecord | None:
        found = self.found.get(keys.record(key))
        return None if found is None else StoredRecord.of(found.value)


@dataclass(slots=True)
class Plan:
    """What one transaction will do: built from a :class:`State`, committed by :class:`Namespaces`."""

    namespace: str
    meta: Meta
    glob: Global
    limits: StoreLimits
    ops: list[m.Op] = field(default_factory=list)
    compares: list[m.Compare] = field(default_factory=list)
    changes: list[tuple[Key, int, bool, str | None]] = field(default_factory=list)
    touches_global: bool = False
    writes: bool = False

    def change(self, key: Key, *, deleted: bool = False, member: str | None = None) -> int:
        """Take the namespace's next version for a change of ``key``."""
        self.meta.version += 1
        self.changes.append((key, self.meta.version, deleted, member))
        self.writes = True
        return self.meta.version

    def add_record(self, key: Key) -> None:
        """A record is new under ``key``: count it, or raise the limit it would pass (nothing written)."""
        meta, limits = self.meta, self.limits
        table = table_of(key.kind, key.role)
        held = meta.tables.get(table, 0)
        if meta.records == 0:
            if limits.max_namespaces is not None and self.glob.namespaces >= limits.max_namespaces:
                raise too_many_namespaces(self.glob.namespaces)
            self.glob.namespaces += 1
            self.touches_global = True
        elif (cap := limits.rank_cap(key.kind)) is not None and held > 0 and held >= cap:
            raise limits.refusal(key.kind, held)
        if held == 0:
            roles = meta.roles(key.kind)
            if limits.max_roles is not None and roles >= limits.max_roles:
                raise too_many_roles(roles)
        meta.tables[table] = held + 1

    def remove_record(self, key: Key) -> None:
        table = table_of(key.kind, key.role)
        left = self.meta.tables.get(table, 0) - 1
        if left > 0:
            self.meta.tables[table] = left
        else:
            self.meta.tables.pop(table, None)

    def do(self, *ops: m.Op) -> None:
        self.ops.extend(ops)
        self.writes = True
