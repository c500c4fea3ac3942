"""The records of a store that keeps them in this process: the rules of a put, a delete and a limit.

:class:`Tables` holds every namespace's records, one dict per (kind, role),
keyed by rank or by name (a key's *slot*: its ``name`` when it has one,
else its ``rank``; ``7`` and ``"7"`` are two slots), so the rank cap is that
dict's length, names counted as ranks, and the version counters: one per
namespace, and a floor above every version of a namespace that emptied and
was forgotten, so a counter started again never repeats a version. Nothing
here is asynchronous or does I/O: the memory store applies each change at
once, the file store (``store.file``) once its journal line is on disk, and
both read through :class:`LocalStore`.
"""

from __future__ import annotations

from collections.abc import Collection, Coroutine, Sequence
from typing import Any

from .interface import Store
from .leases import LeaseTable
from .limits import StoreLimits, too_many_namespaces, too_many_roles
from .local_leases import Journal, LocalLeases, nothing
from .records import HeldLease, Key, LeaseState, Record, Target, by_key

__all__ = ["LocalStore", "Slot", "Tables"]

_Group = tuple[str, str]
"""A (kind, role) pair: one table of ranks (and names) within a namespace."""

Slot = int | str
"""Where a key sits in its table: its rank, or its name (never equal to a rank: an ``int`` is no ``str``)."""


class Tables:
    """The records and version counters of every namespace, with the rules every local store follows.

    Shared by the memory store and the file store (which journals each change
    before applying it here): one place says what a put, a delete and a limit mean.
    """

    def __init__(self, limits: StoreLimits) -> None:
        self.limits = limits
        self._namespaces: dict[str, dict[_Group, dict[Slot, Record]]] = {}
        self._versions: dict[str, int] = {}
        self._floor = 0
        """Above every version of a namespace whose counter was forgotten: new counters start here."""

    # -- reading -------------------------------------------------------

    def get(self, key: Key) -> Record | None:
        groups = self._namespaces.get(key.namespace)
        if groups is None:
            return None
        table = groups.get((key.kind, key.role))
        return None if table is None else table.get(key.rank if key.name is None else key.name)

    def records(self, namespace: str, kind: str, role: str) -> list[Record]:
        table = self._namespaces.get(namespace, {}).get((kind, role), {})
        return sorted(table.values(), key=by_key)

    def count(self, namespace: str, kind: str, role: str) -> int:
        return len(self._namespaces.get(namespace, {}).get((kind, role), ()))

    def all_records(self) -> list[Record]:
        return [
            record
            for groups in self._namespaces.values()
            for table in groups.values()
            for record in table.values()
        ]

    def version(self, namespace: str) -> int:
        return self._versions.get(namespace, self._floor)

    @property
    def high(self) -> int:
        """The highest version any namespace has taken, forgotten ones included."""
        return max([self._floor, *self._versions.values()])

    def namespaces(self) -> list[str]:
        return sorted(self._namespaces)

    def __len__(self) -> int:
        return sum(len(table) for groups in self._namespaces.values() for table in groups.values())

    # -- changing ------------------------------------------------------

    def check_room(
        self,
        key: Key,
        *,
        staged_ranks: Collection[Slot] = (),
        staged_namespaces: Collection[str] = (),
        staged_tables: Collection[tuple[str, str, str]] = (),
    ) -> None:
        """Raise when writing ``key`` would pass a limit; a replacement always has room.

        ``staged_ranks`` (the slots of ``key``'s kind and role), ``staged_namespaces`` and
        ``staged_tables`` (namespace, kind, role) are held by writes on their
        way in, which count as if they had landed.
        """
        groups = self._namespaces.get(key.namespace)
        self._check_roles(key, groups, staged_tables)
        if groups is None and key.namespace not in staged_namespaces:
            limit = self.limits.max_namespaces
            held = len(self._namespaces) + sum(1 for ns in staged_namespaces if ns not in self._namespaces)
            if limit is not None and held >= limit:
                raise too_many_namespaces(held)
        limit = self.limits.rank_cap(key.kind)
        slot = key.rank if key.name is None else key.name
        if limit is None or slot in staged_ranks:
            return
        table = {} if groups is None else groups.get((key.kind, key.role), {})
        if slot in table:
            return
        held = len(table) + sum(1 for rank in staged_ranks if rank not in table)
        if held >= limit:
            raise self.limits.refusal(key.kind, held)

    def _check_roles(
        self,
        key: Key,
        groups: dict[_Group, dict[Slot, Record]] | None,
        staged: Collection[tuple[str, str, str]],
    ) -> None:
        limit = self.limits.max_roles
        if limit is None or (groups is not None and (key.kind, key.role) in groups):
            return
        if (key.namespace, key.kind, key.role) in staged:
            return
        held = {role for kind, role in groups or () if kind == key.kind}
        held.update(
            role for namespace, kind, role in staged if namespace == key.namespace and kind == key.kind
        )
        if len(held) >= limit:
            raise too_many_roles(len(held))

    def next_version(self, namespace: str) -> int:
        return self.version(namespace) + 1

    def put_next(self, key: Key, value: dict[str, Any], at: float) -> Record:
        """:meth:`check_room`, :meth:`next_version` and :meth:`apply_put` in one step, the record made here
        (the memory store's write, which has nothing staged): a key of a table that exists, the common
        case, takes the short way, a new table or namespace the general one."""
        namespace = key.namespace
        groups = self._namespaces.get(namespace)
        table = None if groups is None else groups.get((key.kind, key.role))
        if table is None:
            self.check_room(key)
            record = Record(key, value, self.next_version(namespace), at)
            self.apply_put(record)
            return record
        slot = key.rank if key.name is None else key.name
        current = table.get(slot)
        if current is not None:
            # A replacement always has room. Its record takes the stored (equal) key: the request's
            # copy, and its name, are freed with the request rather than held by the watch history's
            # entry of every change of the key (a smaller, warmer history).
            key = current.key
        else:
            limit = self.limits.rank_cap(key.kind)
            if limit is not None and len(table) >= limit:
                raise self.limits.refusal(key.kind, len(table))
        # The namespace's counter is at or above every version it holds: the new record wins.
        version = self._versions.get(namespace, self._floor) + 1
        record = table[slot] = Record(key, value, version, at)
        self._versions[namespace] = version
        return record

    def apply_put(self, record: Record) -> None:
        """Keep ``record`` (its version already taken); an older version of the key never wins."""
        key = record.key
        groups = self._namespaces.setdefault(key.namespace, {})
        table = groups.setdefault((key.kind, key.role), {})
        slot = key.rank if key.name is None else key.name
        current = table.get(slot)
        if current is None or current.version < record.version:
            table[slot] = record
        self._noted(key.namespace, record.version)

    def apply_delete(self, key: Key, version: int) -> Record | None:
        """Remove ``key`` as of ``version``; return what was removed."""
        self._noted(key.namespace, version)
        groups = self._namespaces.get(key.namespace)
        if groups is None:
            return None
        table = groups.get((key.kind, key.role))
        slot = key.rank if key.name is None else key.name
        current = None if table is None else table.get(slot)
        if table is None or current is None or current.version > version:
            return None
        del table[slot]
        if not table:
            del groups[(key.kind, key.role)]
            if not groups:
                # An empty namespace is forgotten; the floor keeps its versions from coming back.
                del self._namespaces[key.namespace]
                self._floor = max(self._floor, self._versions.pop(key.namespace, 0))
        return current

    def note_version(self, namespace: str, version: int) -> None:
        """Count ``version`` as taken in ``namespace`` without changing a record (a journal line skipped)."""
        self._noted(namespace, version)

    def raise_floor(self, version: int) -> None:
        self._floor = max(self._floor, version)

    def _noted(self, namespace: str, version: int) -> None:
        if namespace in self._namespaces:
            self._versions[namespace] = max(self.version(namespace), version)
        else:
            self._floor = max(self._floor, version)


class LocalStore(Store):
    """A store whose records sit in this process's :class:`Tables`: reads need no I/O.

    ``peek`` and ``peek_records`` read them from any thread: a lookup in a dict
    is atomic and a record is immutable (a write replaces it), so a reader
    sees the old record or the new one, whole. Its leases are a
    :class:`~.local_leases.LocalLeases` it owns: the lease calls are its, and
    a write attaches its record to the lease table (``self._leases``).
    """

    def __init__(
        self, limits: StoreLimits | None, *, granted: Journal = nothing, ended: Journal = nothing
    ) -> None:
        """``granted`` and ``ended``: what the store journals of a lease (see ``local_leases``)."""
        self._tables = Tables(limits if limits is not None else StoreLimits())
        self._lease_calls = LocalLeases(self, self._tables.limits.max_leases, granted=granted, ended=ended)
        self._leases = self._lease_calls.table

    @property
    def lease_table(self) -> LeaseTable:
        """The leases (read by the metrics and by tests)."""
        return self._leases

    def peek(self, key: Key) -> Record | None:
        return self._tables.get(key)

    def peek_records(self, namespace: str, kind: str, role: str) -> list[Record]:
        return self._tables.records(namespace, kind, role)

    async def get(self, key: Key) -> Record | None:
        return self._tables.get(key)

    async def get_many(self, keys: Sequence[Key]) -> list[Record | None]:
        get = self._tables.get
        return [get(key) for key in keys]

    async def records(self, namespace: str, kind: str, role: str) -> list[Record]:
        return self._tables.records(namespace, kind, role)

    async def count(self, namespace: str, kind: str, role: str) -> int:
        return self._tables.count(namespace, kind, role)

    async def version(self, namespace: str) -> int:
        return self._tables.version(namespace)

    async def namespaces(self) -> list[str]:
        return self._tables.namespaces()

    # -- leases (``local_leases``) -------------------------------------

    def grant_lease(self, namespace: str, ttl: float) -> Coroutine[Any, Any, LeaseState]:
        return self._lease_calls.grant(namespace, ttl)

    def keepalive_lease(self, namespace: str, lease: str) -> Coroutine[Any, Any, LeaseState]:
        return self._lease_calls.keepalive(namespace, lease)

    def read_lease(self, namespace: str, lease: str) -> Coroutine[Any, Any, LeaseState]:
        return self._lease_calls.read(namespace, lease)

    def revoke_lease(self, namespace: str, lease: str) -> Coroutine[Any, Any, LeaseState]:
        return self._lease_calls.revoke(namespace, lease)

    def leases_of(self, targets: Sequence[Target]) -> Coroutine[Any, Any, list[HeldLease | None]]:
        return self._lease_calls.leases_of(targets)

    def lease_figures(self) -> tuple[int, int, int] | None:
        return self._lease_calls.figures()
