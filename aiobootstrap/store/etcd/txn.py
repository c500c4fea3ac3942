"""One write in a namespace: read its state, decide, commit only if nothing changed meanwhile.

Every write of a namespace (a put, a delete, a member's change, a lease's
records released) is one etcd transaction that also rewrites the
namespace's ``P/m/NS`` (its version and its tables' counts), and compares
that key's revision with the one it read. So the writes of one namespace
are serialized by etcd, on every replica: of two that read the same state,
one commits and the other reads again and decides anew. That one
comparison makes the version counter, the limits (each table's count, the
roles, and ``P/g``'s namespace count, compared too when the write touches
it) and a ``put_if``'s comparison atomic with the write.

A process sends one write of a namespace at a time (a lock per namespace):
its own writes never race each other, only another replica's.

The transaction also puts ``P/c``, the list of its changes, which the feed
watches; the write returns once the feed has heard its revision (within
the call's deadline), so when a write returns its change is on the feed.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ...exceptions import StoreUnavailable
from ..interface import Key
from ..limits import StoreLimits, too_many_namespaces, too_many_ranks, too_many_roles
from . import messages as m
from .connection import Connection
from .feed import Feed
from .keys import Global, Keys, Meta, StoredRecord, encode_changes, table_of

__all__ = ["Namespaces", "Plan", "State"]

_T = TypeVar("_T")

_ATTEMPTS = 10_000
"""Transactions one write may lose to other replicas' before it gives up (a 503): never, in practice."""


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
        elif limits.max_ranks is not None and held > 0 and held >= limits.max_ranks:
            raise too_many_ranks(held)
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


class Namespaces:
    """Runs the writes of namespaces, one at a time per namespace in this process (see the top)."""

    def __init__(self, connection: Connection, keys: Keys, feed: Feed, limits: StoreLimits) -> None:
        self._connection = connection
        self._keys = keys
        self._feed = feed
        self._limits = limits
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    async def read(self, namespace: str, keys: Sequence[bytes] = (), ranges: Sequence[bytes] = ()) -> State:
        """The namespace's state, ``keys`` and the keys under each of ``ranges``, at one revision."""
        k = self._keys
        ops = [m.get(k.boot), m.get(k.globals), m.get(k.meta(namespace))]
        ops += [m.get(key) for key in keys] + [m.get_prefix(prefix) for prefix in ranges]
        reply = await self._connection.call(lambda client: m.read(client, ops), read=True)
        boot, glob, meta = (found[0] if found else None for found in reply.reads[:3])
        self._feed.check_boot(None if boot is None else boot.value)
        assert boot is not None
        g = Global.of(None if glob is None else glob.value, 0 if glob is None else glob.mod_revision)
        meta_state = Meta.of(
            None if meta is None else meta.value, 0 if meta is None else meta.mod_revision, g.floor
        )
        found = {key: (hits[0] if hits else None) for key, hits in zip(keys, reply.reads[3:], strict=False)}
        extra = reply.reads[3 + len(keys) :]
        return State(boot.mod_revision, g, meta_state, found, dict(zip(ranges, extra, strict=True)))

    async def write(
        self,
        namespace: str,
        decide: Callable[[State, Plan], _T],
        keys: Sequence[bytes] = (),
        ranges: Sequence[bytes] = (),
    ) -> _T:
        """Read, ``decide`` (which fills the plan and returns the result, or raises), commit; again on a race."""
        lock, users = self._locks.get(namespace) or (asyncio.Lock(), 0)
        self._locks[namespace] = (lock, users + 1)
        try:
            async with lock:
                return await self._write(namespace, decide, keys, ranges)
        finally:
            lock, users = self._locks[namespace]
            if users == 1:
                del self._locks[namespace]
            else:
                self._locks[namespace] = (lock, users - 1)

    async def _write(
        self,
        namespace: str,
        decide: Callable[[State, Plan], _T],
        keys: Sequence[bytes],
        ranges: Sequence[bytes],
    ) -> _T:
        k = self._keys
        for _ in range(_ATTEMPTS):
            state = await self.read(namespace, keys, ranges)
            plan = Plan(namespace, copy.deepcopy(state.meta), copy.copy(state.glob), self._limits)
            result = decide(state, plan)
            if not plan.writes:
                return result
            meta_key = k.meta(namespace)
            compares = [m.mod_is(k.boot, state.boot_mod), m.mod_is(meta_key, state.meta.mod), *plan.compares]
            ops = list(plan.ops)
            if plan.meta.records > 0:
                ops.append(m.put(meta_key, plan.meta.encode()))
            elif state.meta.mod:
                ops.append(m.delete(meta_key))
                plan.glob.namespaces -= 1
                plan.glob.floor = max(plan.glob.floor, plan.meta.version)
                plan.touches_global = True
            if plan.touches_global:
                compares.append(m.mod_is(k.globals, state.glob.mod))
                ops.append(m.put(k.globals, plan.glob.encode()))
            if plan.changes:
                ops.append(m.put(k.changes, encode_changes(namespace, plan.changes)))
            reply = await self._connection.call(m.txn(compares, ops))
            if reply.succeeded:
                if plan.changes:
                    await self._feed.reached(reply.revision, self._connection.timeout)
                return result
        raise StoreUnavailable(f"etcd at {self._connection.where}: a write lost {_ATTEMPTS} races in a row.")


def now() -> float:
    return time.time()
