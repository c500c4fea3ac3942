"""The Redis store: :class:`RedisStore`, the store interface over the rooms of ``store.redis``.

A get is a field of an ``HMGET`` on a rank table (``keys``), one per table
and read batch (``reads``, ``batcher``); a whole table's read (``HGETALL``,
``HKEYS``) is a call of its own; each read also asks whose data it read
(``incarnation``). A write is one Lua script (``lua``), atomic in Redis
(the puts of a write batch share one call, ``puts``), sent in the
write batcher's pipeline while the feed holds back the feed's entries for
its key (``feed``); when it returns, the store announces its own change.
A set member change is a read, then a put that happens only if the version
read is still the record's (the script compares), again on a lost race: so
it is atomic across replicas. Each write also moves its record (or set
member) to its lease or to none, in the same script; the leases and their
reaper are ``leases``'s. Every call runs under one deadline and every
failure is :class:`~aiobootstrap.exceptions.StoreUnavailable`
(``connection``).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Sequence
from typing import Any

from ... import _json
from ..._names import check_name
from ..._ranks import RankSet
from ...exceptions import LeaseNotFound, StoreUnavailable
from ..interface import READ_BY_KEY, ChangeListener, Store
from ..limits import StoreLimits, too_many_namespaces, too_many_roles
from ..members import with_member
from ..records import Change, HeldLease, Key, LeaseState, Record, Target, by_key
from ..redacted import describe
from . import lease_lua, lua
from .batcher import Batcher
from .connection import Connection, reason, redis_missing
from .durability import warn_if_lossy, warn_if_unreplicated
from .feed import Feed, block_seconds
from .incarnation import Incarnations
from .keys import NAMED, Keys, TableNames, decode, field, key_at, text
from .leases import RedisLeases
from .packing import pack_in_c
from .puts import Puts
from .reads import RankReads

__all__ = ["RedisStore"]

_READ_CHUNK = 4096
"""Fields per HMGET when a large rank set is read (``records_in``)."""

_READS_IN_FLIGHT, _WRITES_IN_FLIGHT = 1, 4
"""Batches out at once, what is asked meanwhile going in the next. Four writes: with one, a replica
sat idle while Redis ran a batch (PUT 0.65x one process; 0.8-0.94x with four: docs/benchmarks.md)."""


class RedisStore(Store):
    """Records in Redis, shared by every replica that names the same Redis and prefix."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "aiobootstrap",
        limits: StoreLimits | None = None,
        timeout: float = 3.0,
        open_timeout: float = 3.0,
        poll_interval: float = 1.0,
        feed_length: int = 10_000,
        max_connections: int = 64,
        min_replicas: int = 0,
    ) -> None:
        """``min_replicas``: how many Redis replicas must hold a write before it is acknowledged (``WAIT``)."""
        if redis_missing():
            raise ImportError("The Redis store needs the redis extra: pip install 'aiobootstrap[redis]'.")
        check_name(prefix, "store prefix")
        self._description = describe(url)
        self._limits = limits if limits is not None else StoreLimits()
        self._open_timeout = open_timeout
        self._feed_length = feed_length
        self._keys = Keys.of(prefix)
        self._connection = connection = Connection(
            url,
            where=self._description,
            prefix=prefix,
            timeout=timeout,
            block_seconds=block_seconds(poll_interval),
            max_connections=max_connections,
        )
        self._feed = Feed(connection, self._keys, poll_interval=poll_interval)
        self._incarnations = checked = Incarnations(connection, self._keys.incarnation, self._feed)
        self._reads = Batcher(
            connection,
            connection.read,
            name="aiobootstrap redis reads",
            in_flight=_READS_IN_FLIGHT,
            check=checked,
        )
        self._min_replicas = min_replicas
        self._writes = Batcher(
            connection,
            connection.call,
            name="aiobootstrap redis writes",
            in_flight=_WRITES_IN_FLIGHT,
            replicas=min_replicas,
            replica_wait=min(1.0, timeout / 2),  # well inside the call's deadline
        )
        self._ranks = RankReads(self._reads)
        self._puts = Puts(connection, self._writes, self._keys, self._limits, feed_length)
        self._tables = TableNames(self._keys)
        self._leases = RedisLeases(
            connection, self._writes, self._keys, self._limits, feed_length, self._feed.saw
        )

    # -- opening and closing --------------------------------------------------

    @property
    def incarnation(self) -> str:
        return self._feed.incarnation

    @property
    def description(self) -> str:
        return self._description

    def follow_in_order(self, listener: ChangeListener) -> bool:
        self._feed.tap = listener
        return True

    async def open(self, listener: ChangeListener) -> None:
        """Connect, read the feed's tail, start the reader and the watcher.

        Redis unreachable: retried for ``open_timeout`` seconds, then
        :class:`StoreUnavailable` with one line saying so (the CLI exits 2).
        """
        connection = self._connection
        if connection.client is not None:
            raise RuntimeError("The Redis store is already open.")
        connection.connect()
        for client in (connection.client, connection.feed_client):
            if client is not None:
                pack_in_c(client.connection_pool)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._open_timeout
        delay = 0.05
        while True:
            try:
                position = await self._feed.poll()
                break
            except StoreUnavailable as exc:
                if loop.time() + delay >= deadline:
                    await connection.disconnect()
                    # The last failure's own words, without the "Redis at ..." its detail repeats.
                    cause = exc.__cause__
                    why = exc.detail if cause is None else reason(cause)
                    raise StoreUnavailable(
                        f"Redis at {self._description} is unreachable ({why}); "
                        f"gave up after {self._open_timeout:g} s."
                    ) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)
        await warn_if_lossy(connection)
        await warn_if_unreplicated(connection, self._min_replicas)
        self._feed.start(listener, position)
        self._leases.start()

    async def close(self) -> None:
        await self._leases.stop()
        await self._feed.stop()
        # Calls already sent get their answers (within their deadline): a write
        # Redis applies is better acknowledged than reported as failed.
        batches = [*self._reads.tasks, *self._writes.tasks]
        if batches:
            await asyncio.wait(batches, timeout=self._connection.timeout)
            for batch in batches:
                batch.cancel()
            await asyncio.wait(batches)
        await self._connection.disconnect()

    # -- writing --------------------------------------------------------------

    async def put(self, key: Key, value: dict[str, Any], lease: str | None = None) -> Record:
        record = await self._put(key, value, lease=lease)
        assert record is not None
        return record

    async def put_if(
        self, key: Key, value: dict[str, Any], version: int, lease: str | None = None
    ) -> Record | None:
        # The script compares the record's version (-1 absent, as ABSENT) before it writes.
        return await self._put(key, value, version, lease=lease)

    async def set_member(
        self, key: Key, member: str, *, present: bool, lease: str | None = None
    ) -> Record | None:
        lease = lease if present else None
        # Read, change, and write only if nobody wrote in between (the script
        # compares versions); a lost race reads again. Atomic across replicas.
        while True:
            current = await self.get(key)
            value = with_member(None if current is None else current.value, member, present=present)
            if value is None:
                if current is None or not present or await self._hold(current, member, lease):
                    return current
                continue
            expected = -1 if current is None else current.version
            marked = f"+{member}" if present else f"-{member}"
            record = await self._put(key, value, expected, lease=lease if present else None, member=marked)
            if record is not None:
                return record

    async def _hold(self, current: Record, member: str, lease: str | None) -> bool:
        """Move ``member``, listed already, to ``lease`` or to none; ``False``: the record changed meanwhile."""
        key = current.key
        keys = self._keys
        args = [key.namespace, key.kind, key.role, field(key), member, lease or "", current.version]
        # In the write batch, so --store-min-replicas waits for it like any write.
        reply = await self._writes.script(lease_lua.HOLD, [keys.table(key), keys.leases, keys.owners], args)
        if int(reply) == -5:
            raise LeaseNotFound(lease or "")
        return int(reply) == 0

    async def _put(
        self,
        key: Key,
        value: dict[str, Any],
        expected: int | None = None,
        *,
        lease: str | None = None,
        member: str | None = None,
    ) -> Record | None:
        """Write ``value``, held by ``lease`` (or none); with ``expected``, only if the record's version is still
        that (else ``None``). ``member``: the lease holds that member of a set record, not the record, marked
        ``+`` added or ``-`` removed (the feed tells every replica so)."""
        table = self._tables.of(key)
        registered_at = time.time()
        fields = [
            key.namespace,
            key.kind,
            key.role,
            key.rank if key.name is None else NAMED + key.name,
            repr(registered_at),
            _json.dumps(value),
            lease or "",
            "-" if member is None else member,
            "" if expected is None else expected,
            self._limits.kind_caps.get(key.kind, ""),
        ]
        with self._feed.writing(key):
            status, held, incarnation = await self._puts.put(table, fields)
        self._feed.saw(incarnation)
        if status < 0:
            self._feed.wrote_nothing(key)
        if status == -3:
            return None
        if status == -5:
            raise LeaseNotFound(lease or "")
        if status == -2:
            raise too_many_namespaces(held)
        if status == -4:
            raise too_many_roles(held)
        if status == -1:
            raise self._limits.refusal(key.kind, held)
        record = Record(key, value, status, registered_at)
        self._feed.wrote(Change(key, record.version, record, member=member))
        return record

    async def delete(self, key: Key) -> Record | None:
        table = self._tables.of(key)
        reply = await self._write(
            key,
            lua.DELETE,
            self._keys.write(table),
            [secrets.token_hex(8), key.namespace, key.kind, key.role, field(key), self._feed_length],
        )
        version = int(reply[0])
        self._feed.saw(text(reply[1]))
        if version == 0:
            self._feed.wrote_nothing(key)
            return None
        self._feed.wrote(Change(key, version, deleted=True))
        return decode(key, reply[2])

    async def _write(self, key: Key, script: str, keys: list[str], args: list[Any]) -> Any:
        """Run a write script in this loop turn's pipeline, the feed holding back ``key``'s entries meanwhile."""
        with self._feed.writing(key):
            return await self._writes.script(script, keys, args)

    # -- leases (``leases``) ---------------------------------------------------------

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

    async def get(self, key: Key) -> Record | None:
        at = str(key.rank) if key.name is None else NAMED + key.name
        blobs = await self._ranks.fetch(self._tables.of(key), [at])
        return None if blobs[0] is None else self._ranks.record(key, blobs[0])

    async def get_many(self, keys: Sequence[Key]) -> list[Record | None]:
        if not keys:
            return []
        # One HMGET per table, all in the same batch: one round trip.
        by_table: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            by_table.setdefault(self._tables.of(key), []).append(index)
        reads = [
            self._ranks.fetch(table, [field(keys[index]) for index in indexes])
            for table, indexes in by_table.items()
        ]
        replies = await asyncio.gather(*reads)
        found: list[Record | None] = [None] * len(keys)
        for indexes, blobs in zip(by_table.values(), replies, strict=True):
            for index, blob in zip(indexes, blobs, strict=True):
                if blob is not None:
                    found[index] = self._ranks.record(keys[index], blob)
        return found

    async def records(self, namespace: str, kind: str, role: str) -> list[Record]:
        table = self._keys.table(Key(namespace, kind, role, 0))
        blobs = await self._incarnations.read(lambda pipe: pipe.hgetall(table))
        found = [decode(key_at(namespace, kind, role, at), blob) for at, blob in blobs.items()]
        return sorted(found, key=by_key)

    async def count(self, namespace: str, kind: str, role: str) -> int:
        table = self._keys.table(Key(namespace, kind, role, 0))
        return int(await self._incarnations.read(lambda pipe: pipe.hlen(table)))

    async def records_in(self, namespace: str, kind: str, role: str, ranks: RankSet) -> list[Record]:
        if len(ranks) <= READ_BY_KEY:
            return await super().records_in(namespace, kind, role, ranks)
        # The table's rank fields, then only the records asked for: a batch of
        # a large set never transfers the table's other records.
        table = self._keys.table(Key(namespace, kind, role, 0))
        fields = await self._incarnations.read(lambda pipe: pipe.hkeys(table))
        # Ranks only: a named record's field (``:NAME``) is in no rank set.
        wanted = sorted(rank for rank in (int(at) for at in fields if at[:1] != b":") if rank in ranks)
        found: list[Record] = []
        for start in range(0, len(wanted), _READ_CHUNK):
            chunk = wanted[start : start + _READ_CHUNK]
            blobs = await self._ranks.fetch(table, [str(rank) for rank in chunk])
            found.extend(
                self._ranks.record(Key(namespace, kind, role, rank), blob)
                for rank, blob in zip(chunk, blobs, strict=True)
                if blob is not None
            )
        return found

    async def version(self, namespace: str) -> int:
        connection, keys = self._connection, self._keys
        reply = await connection.read(
            lambda client: connection.run(client, lua.VERSION, [keys.versions, keys.floor], [namespace])
        )
        return int(reply)

    async def namespaces(self) -> list[str]:
        names = await self._incarnations.read(lambda pipe: pipe.hkeys(self._keys.counts))
        return sorted(text(name) for name in names)

    async def ping(self) -> None:
        await self._connection.read(lambda client: client.ping())
