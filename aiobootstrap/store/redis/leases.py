"""Leases in Redis: the lease calls, and the reaper that ends the leases past their deadline.

Theory of operation
-------------------
A lease lives in Redis, not in a replica (``lease_lua`` has the keys): it is
granted, kept alive, read and revoked through any replica, and a replica that
restarts loses nothing. Its deadline is on Redis' clock (``TIME`` in the
scripts), so the replicas' clocks do not matter.

Every replica runs one *reaper*: it asks Redis for the leases past their
deadline (``ZRANGEBYSCORE`` in one script, which also says how far off the
next deadline is), runs ``lua.END`` for each, then sleeps until that next
deadline, or :data:`REAP_INTERVAL` at most (a lease granted through another
replica meanwhile may be due sooner; one granted through this replica wakes
it when due sooner). ``lua.END`` checks the deadline again, deletes each
record on the lease as a delete (or a set member's removal) does, a change
with its own version on the feed, and removes the lease, all in one atomic
step: when several replicas reap the same lease, the first does it all and
the others find it gone. So a lease ends exactly once, whichever replica
sees it first, within milliseconds of its deadline (``REAP_INTERVAL`` at
worst); a replica cut off from Redis cannot run the script and so never
expires anything. The deletions reach the listeners through the change
feed, like any other replica's writes: waiters and watchers of every
replica alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Callable, Sequence
from typing import Any

from ...exceptions import LeaseNotFound, StoreUnavailable
from ..leases import grace_after_held_loop
from ..limits import StoreLimits, too_many_leases, too_many_leases_in
from ..records import HeldLease, LeaseState, Target
from ..stopping import stop_task
from . import lease_lua, lua
from .batcher import Batcher
from .connection import Connection, reraise_cancellation
from .keys import Keys, field, key_at, text

__all__ = ["REAP_INTERVAL", "RedisLeases"]

log = logging.getLogger("aiobootstrap")

KEEPALIVE_SECONDS = 1.0
"""A keepalive's deadline (the store's, when that is shorter): a client keeps a lease alive every third of
its TTL, so one waiting out the store's 3 s on a paused Redis would answer after the next was due; it is a
``503`` instead, which the client retries (``docs/scale-out.md``'s failure matrix)."""

REAP_INTERVAL = 0.25
"""The longest a reaper sleeps between two looks for leases past their deadline (each replica's)."""

_HOLDERS_CHUNK = 4096
"""Records whose lease one script looks up, at most (a listing's table is read in chunks)."""

_REAP_BATCH = 256
"""Leases ended per look, at most; a longer backlog is taken on at once by the next look."""


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Read the outcome of a call nobody waits for any more (else asyncio logs it as never retrieved)."""
    if not future.cancelled():
        future.exception()


def _target(blob: bytes | str) -> Target:
    """A target as the scripts encode it: ``[NS, KIND, ROLE, FIELD]`` (a rank's or a name's, ``keys.field``) and
    perhaps the member."""
    parts = json.loads(blob)
    return key_at(parts[0], parts[1], parts[2], parts[3]), parts[4] if len(parts) > 4 else None


class RedisLeases:
    """The leases of one Redis store: its calls, its reaper and this process's figures."""

    def __init__(
        self,
        connection: Connection,
        writes: Batcher,
        keys: Keys,
        limits: StoreLimits,
        feed_length: int,
        saw: Callable[[str], None],
    ) -> None:
        self._connection = connection
        self._writes = writes
        """The store's write batcher: a lease's scripts share its pipeline of the loop turn."""
        self._keys = keys
        self._max = -1 if limits.max_leases is None else limits.max_leases
        self._feed_length = feed_length
        self._saw = saw
        self._reaper: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        """Set to wake the reaper early; replaced, never cleared, at each sleep."""
        self._wake_at = 0.0
        """When the reaper's sleep ends (the loop's clock)."""
        self.held = 0
        """Leases in Redis, every replica's, at this replica's last look."""
        self.expired = 0
        """Leases this replica ended at their deadline."""
        self.revoked = 0
        """Leases revoked through this replica."""

    # -- the calls -------------------------------------------------------------

    async def grant(self, namespace: str, ttl: float) -> LeaseState:
        keys = self._keys
        while True:
            lease = secrets.token_hex(8)
            reply = await self._run(
                lease_lua.GRANT, [keys.leases, keys.deadlines], [lease, namespace, repr(ttl), self._max]
            )
            status, self.held = int(reply[0]), int(reply[1])
            if status == -1:
                raise too_many_leases(self.held)
            if status == -3:
                raise too_many_leases_in(namespace, int(reply[2]), int(reply[3]))
            if status == 0:
                if asyncio.get_running_loop().time() + ttl < self._wake_at:
                    self._wake.set()  # due before the reaper's next look
                return LeaseState(lease, namespace, ttl, ttl)

    async def keepalive(self, namespace: str, lease: str) -> LeaseState:
        """Within :data:`KEEPALIVE_SECONDS` (a ``503`` past it, on a paused Redis): the script may still run
        later, which only renews the lease once more."""
        keys = self._keys
        answer = self._writes.script(lease_lua.KEEPALIVE, [keys.leases, keys.deadlines], [lease, namespace])
        seconds = min(KEEPALIVE_SECONDS, self._connection.timeout)
        try:
            async with asyncio.timeout(seconds):
                reply = await asyncio.shield(answer)
        except TimeoutError:
            answer.add_done_callback(_retrieved)
            raise StoreUnavailable(
                f"Redis at {self._connection.where} did not answer within {seconds:g} s."
            ) from None
        if reply == 0:
            raise LeaseNotFound(lease)
        ttl = float(text(reply))
        return LeaseState(lease, namespace, ttl, ttl)

    async def read(self, namespace: str, lease: str) -> LeaseState:
        keys = self._keys
        reply = await self._read(
            lease_lua.READ, [keys.leases, keys.deadlines, keys.held(lease)], [lease, namespace]
        )
        if reply == 0:
            raise LeaseNotFound(lease)
        ttl, remaining, targets = reply
        records = tuple(sorted(map(_target, targets), key=_order))
        return LeaseState(lease, namespace, float(text(ttl)), int(remaining) / 1000, records)

    async def revoke(self, namespace: str, lease: str) -> LeaseState:
        state = await self._end(lease, namespace)
        if state is None:
            raise LeaseNotFound(lease)
        self.revoked += 1
        log.info(
            "revoked lease %s: deleted its %d record(s)",
            lease,
            len(state.records),
            extra={"namespace": namespace},
        )
        return state

    async def holders(self, targets: Sequence[Target]) -> list[HeldLease | None]:
        """Each per-rank record's lease, its seconds remaining and its TTL (a set member's: ``None``)."""
        found: list[HeldLease | None] = [None] * len(targets)
        by_table: dict[tuple[str, str, str], list[int]] = {}
        for index, (key, member) in enumerate(targets):
            if member is None:
                by_table.setdefault((key.namespace, key.kind, key.role), []).append(index)
        keys = [self._keys.owners, self._keys.deadlines, self._keys.leases]
        for table, indexes in by_table.items():
            for start in range(0, len(indexes), _HOLDERS_CHUNK):
                chunk = indexes[start : start + _HOLDERS_CHUNK]
                args = [*table, *(field(targets[index][0]) for index in chunk)]
                reply = await self._read(lease_lua.HOLDERS, keys, args)
                for n, index in enumerate(chunk):
                    lease = text(reply[3 * n])
                    if lease:
                        found[index] = (lease, int(reply[3 * n + 1]) / 1000, float(text(reply[3 * n + 2])))
        return found

    async def _end(self, lease: str, namespace: str) -> LeaseState | None:
        """Run ``lua.END``: revoke (``namespace``) or expire if due (``""``); ``None`` when nothing ended."""
        reply = await self._run(
            lua.END, self._keys.ending(lease), [secrets.token_hex(8), self._feed_length, lease, namespace]
        )
        self._saw(text(reply[1]))
        if int(reply[0]) != 1:
            return None
        held_ns, ttl = text(reply[2]).split(" ", 1)
        records = tuple(sorted(map(_target, reply[3]), key=_order))
        return LeaseState(lease, held_ns, float(ttl), 0.0, records)

    async def _read(self, script: str, keys: list[str], args: list[Any]) -> Any:
        """A script that changes nothing: asked once more on a broken connection."""
        connection = self._connection
        return await connection.read(lambda client: connection.run(client, script, keys, args))

    async def _run(self, script: str, keys: list[str], args: list[Any]) -> Any:
        return await self._writes.script(script, keys, args)

    # -- the reaper ------------------------------------------------------------

    def start(self) -> None:
        self._reaper = asyncio.create_task(self._reap(), name="aiobootstrap redis lease reaper")

    async def stop(self) -> None:
        reaper, self._reaper = self._reaper, None
        await stop_task(reaper)

    async def _reap(self) -> None:
        keys = self._keys
        while True:
            try:
                reply = await self._read(lease_lua.DUE, [keys.deadlines, keys.leases], [_REAP_BATCH])
                self.held = int(reply[0])
                # Each its own script, all at once (the pool's connections pipeline them).
                await asyncio.gather(*(self._expire(text(lease)) for lease in reply[1]))
                if len(reply[1]) >= _REAP_BATCH:
                    continue
                wait = int(reply[2])
            except StoreUnavailable:
                reraise_cancellation()  # cut off from Redis: nothing can expire from here
                wait = -1
            # Until the first deadline Redis knows of, or the interval (a lease granted
            # through another replica meanwhile); a grant here that is due sooner wakes it.
            sleep = REAP_INTERVAL if wait < 0 else min(REAP_INTERVAL, (wait + 1) / 1000)
            loop = asyncio.get_running_loop()
            self._wake_at, self._wake = loop.time() + sleep, asyncio.Event()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(sleep):
                    await self._wake.wait()
            grace = grace_after_held_loop(loop.time() - self._wake_at)
            if grace:
                # Held past its look: the keepalives this replica was sent meanwhile go to Redis first
                # (store.leases says why).
                await asyncio.sleep(grace)

    async def _expire(self, lease: str) -> None:
        state = await self._end(lease, "")
        if state is None:
            return  # another replica ended it first (or it was kept alive meanwhile)
        self.expired += 1
        self.held = max(0, self.held - 1)
        log.info(
            "lease %s expired: deleted its %d record(s)",
            lease,
            len(state.records),
            extra={"namespace": state.namespace},
        )


def _order(target: Target) -> tuple[str, str, str, int, str]:
    key, member = target
    return key.kind, key.role, key.name or "", key.rank, member or ""
