"""The etcd store: :class:`EtcdStore`, the store interface over the rooms of ``store.etcd``.

A read is one etcd range (several keys at one revision, in one round
trip, with ``P/boot`` read beside them: ``feed``'s boot check; the gets of
one loop turn together, ``reads``), asked of the next member when the
current one fails. A write goes in its
namespace's next transaction with the writes waiting beside it
(``namespaces``), decided by ``records``; the leases are ``leases``'s.
Every call runs under one deadline and every failure is
:class:`~aiobootstrap.exceptions.StoreUnavailable` (``connection``).

Versions: each namespace keeps a counter of its own in ``P/m/NS``,
advanced in the transaction of each change, so versions are 1, 2, 3...
per namespace, the same on every replica, as in one process. (etcd's
revision would also be strictly increasing, but with gaps that every
other namespace's writes, lease grants and boot ids open, and one
transaction has one revision: a release of several records would have to
be several transactions.) ``docs/scale-out.md`` says more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..._names import check_name
from ...exceptions import StoreUnavailable
from ..etcd_url import parse_etcd_url
from ..interface import ChangeListener, Store
from ..limits import StoreLimits
from ..records import HeldLease, Key, LeaseState, Record, Target, by_key
from ..redacted import describe
from . import messages as m
from .connection import Connection, etcd_missing, reason
from .feed import Feed
from .keys import Global, Keys, Meta, StoredRecord, key_of, table_of
from .leases import EtcdLeases
from .namespaces import Namespaces
from .reads import Reads
from .records import Writes

__all__ = ["EtcdStore"]


class EtcdStore(Store):
    """Records in etcd, shared by every replica that names the same cluster and prefix."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "aiobootstrap",
        limits: StoreLimits | None = None,
        timeout: float = 3.0,
        open_timeout: float = 3.0,
        poll_interval: float = 1.0,
    ) -> None:
        """``prefix``: the URL's ``?prefix=`` when it has one, else this (``--store-prefix``)."""
        if etcd_missing():
            raise ImportError("The etcd store needs the etcd extra: pip install 'aiobootstrap[etcd]'.")
        target = parse_etcd_url(url)
        prefix = target.prefix or prefix
        check_name(prefix, "store prefix")
        self._description = describe(url)
        self._limits = limits if limits is not None else StoreLimits()
        self._open_timeout = open_timeout
        self._keys = keys = Keys(prefix)
        self._connection = connection = Connection(
            target.endpoints,
            where=self._description,
            timeout=timeout,
            username=target.username,
            password=target.password,
            tls=target.tls,
            cacert=target.cacert,
        )
        self._feed = feed = Feed(connection, keys, poll_interval=poll_interval)
        self._namespaces = Namespaces(connection, keys, feed, self._limits)
        self._reads = Reads(connection, keys, feed)
        self._writes = Writes(keys)
        self._leases = EtcdLeases(connection, keys, self._namespaces, self._limits)
        feed.follow_lease_ends(self._leases)

    # -- opening and closing --------------------------------------------------

    @property
    def incarnation(self) -> str:
        return self._feed.incarnation

    @property
    def description(self) -> str:
        return self._description

    async def open(self, listener: ChangeListener) -> None:
        """Connect, make or read the boot id, start the feed from the revision after it.

        etcd unreachable (or without a leader): retried for ``open_timeout``
        seconds, then :class:`StoreUnavailable` with one line saying so.
        """
        if self._connection.opened:
            raise RuntimeError("The etcd store is already open.")
        self._connection.connect()  # an unreadable CA file: StoreUnavailable, one line
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._open_timeout
        delay = 0.05
        why = "no answer"
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    incarnation, revision = await self._feed.boot()
                break
            except (StoreUnavailable, TimeoutError) as exc:
                if isinstance(exc, StoreUnavailable):
                    # The last failure's own words (a refused password, say), not the deadline's.
                    why = exc.detail if exc.__cause__ is None else reason(exc.__cause__)
                if loop.time() + delay >= deadline:
                    await self._connection.close()
                    raise StoreUnavailable(
                        f"etcd at {self._description} is unreachable ({why}); "
                        f"gave up after {self._open_timeout:g} s."
                    ) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)
        self._feed.start(listener, incarnation, revision)
        self._leases.start()

    async def close(self) -> None:
        await self._namespaces.stop()
        await self._leases.stop()
        await self._feed.stop()
        reads = list(self._reads.tasks)
        if reads:
            await asyncio.wait(reads, timeout=self._connection.timeout)
        await self._connection.close()

    # -- writing --------------------------------------------------------------

    async def put(self, key: Key, value: dict[str, Any], lease: str | None = None) -> Record:
        record = await self._put(key, value, None, lease)
        assert record is not None
        return record

    async def put_if(
        self, key: Key, value: dict[str, Any], version: int, lease: str | None = None
    ) -> Record | None:
        return await self._put(key, value, version, lease)

    async def _put(
        self, key: Key, value: dict[str, Any], expected: int | None, lease: str | None
    ) -> Record | None:
        decide = self._writes.put(key, value, expected, lease)
        result: Record | None = await self._namespaces.write(
            key.namespace, decide, self._writes.reads(key, lease)
        )
        return result

    async def delete(self, key: Key) -> Record | None:
        result: Record | None = await self._namespaces.write(
            key.namespace, self._writes.delete(key), self._writes.reads(key, None)
        )
        return result

    async def set_member(
        self, key: Key, member: str, *, present: bool, lease: str | None = None
    ) -> Record | None:
        lease = lease if present else None
        decide = self._writes.set_member(key, member, present, lease)
        result: Record | None = await self._namespaces.write(
            key.namespace, decide, self._writes.reads(key, lease)
        )
        return result

    # -- leases (``leases``) ------------------------------------------------------

    async def grant_lease(self, namespace: str, ttl: float) -> LeaseState:
        return await self._leases.grant(namespace, ttl)

    async def keepalive_lease(self, namespace: str, lease: str) -> LeaseState:
        return await self._leases.keepalive(namespace, lease)

    async def read_lease(self, namespace: str, lease: str) -> LeaseState:
        return await self._leases.read(namespace, lease)

    async def revoke_lease(self, namespace: str, lease: str) -> LeaseState:
        return await self._leases.revoke(namespace, lease)

    async def leases_of(self, targets: Sequence[Target]) -> list[HeldLease | None]:
        return await self._leases.holders(targets)

    def lease_figures(self) -> tuple[int, int, int] | None:
        leases = self._leases
        return leases.held, leases.expired, leases.revoked

    # -- reading --------------------------------------------------------------

    async def _read(self, ops: list[m.Op]) -> list[list[m.Found]]:
        """Read ``ops`` and ``P/boot``; no answer unless the boot id is ours (``feed``).

        At one revision up to :data:`~.messages.MAX_OPS` reads; more go in several transactions at once.
        """
        k = self._keys
        chunks = [ops[start : start + m.MAX_OPS - 1] for start in range(0, len(ops), m.MAX_OPS - 1)] or [[]]
        replies = await asyncio.gather(
            *(self._connection.call(m.txn((), [m.get(k.boot), *chunk]), read=True) for chunk in chunks)
        )
        found: list[list[m.Found]] = []
        for reply in replies:
            boot = reply.reads[0]
            self._feed.check_boot(boot[0].value if boot else None)
            found += reply.reads[1:]
        return found

    async def get(self, key: Key) -> Record | None:
        return (await self.get_many([key]))[0]

    async def get_many(self, keys: Sequence[Key]) -> list[Record | None]:
        if not keys:
            return []
        found = await asyncio.gather(*[self._reads.ask(self._keys.record(key)) for key in keys])
        return [
            None if hit is None else StoredRecord.of(hit.value).record(key)
            for key, hit in zip(keys, found, strict=True)
        ]

    async def records(self, namespace: str, kind: str, role: str) -> list[Record]:
        table = self._keys.table(namespace, kind, role)
        (found,) = await self._read([m.get_prefix(table)])
        records = [
            StoredRecord.of(hit.value).record(key_of(namespace, kind, role, self._keys.at_in(table, hit.key)))
            for hit in found
        ]
        return sorted(records, key=by_key)

    async def count(self, namespace: str, kind: str, role: str) -> int:
        meta = await self._meta(namespace)
        return meta.tables.get(table_of(kind, role), 0)

    async def _meta(self, namespace: str) -> Meta:
        glob, meta = await self._read([m.get(self._keys.globals), m.get(self._keys.meta(namespace))])
        g = Global.of(glob[0].value if glob else None, 0)
        return Meta.of(meta[0].value if meta else None, meta[0].mod_revision if meta else 0, g.floor)

    async def version(self, namespace: str) -> int:
        return (await self._meta(namespace)).version

    async def namespaces(self) -> list[str]:
        (found,) = await self._read([m.get_prefix(self._keys.metas, keys_only=True)])
        return sorted(self._keys.namespace_of(hit.key) for hit in found)

    async def ping(self) -> None:
        await self._read([])
