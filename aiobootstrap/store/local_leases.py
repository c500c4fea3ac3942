"""Leases on a store kept in this process (memory, file): the lease calls, the one timer, the deletions.

Theory of operation
-------------------
The leases and their heap of deadlines are a :class:`~.leases.LeaseTable`.
One ``loop.call_later`` handle is set for the heap's first deadline; when it
fires, every lease due leaves the table at once, one task deletes the records
of all of them, and the handle is set again for the next deadline. No lease
has a task or a timer of its own, and a keepalive touches neither.

A lease's records are deleted through the store's own ``delete`` and
``set_member``, exactly as an unregister deletes them: a change with a new
version each, on the feed, so waiters (and watchers) are told. A record
registered again since the lease ended has another owner and is left alone.
Revoking does the same at once, and answers when the deletions are done.

:class:`LocalLeases` is a part the store owns, not a class it stands on: the
store attaches records to the table as it writes them (``table.attach``), and
hands in what it journals when a lease is granted or ended (the file store;
nothing, in memory).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence

from .interface import Store
from .leases import Lease, LeaseTable, grace_after_held_loop
from .records import HeldLease, LeaseState, Target

__all__ = ["Journal", "LocalLeases", "nothing"]

log = logging.getLogger("aiobootstrap")

Journal = Callable[[Lease], Awaitable[None]]
"""What a store makes durable of a lease granted or ended, before it is answered."""


async def nothing(lease: Lease) -> None:
    """The journal of a store that keeps nothing on disk."""


class LocalLeases:
    """The leases of a store kept in this process (memory, file): their calls, their one timer, their ends."""

    def __init__(
        self,
        store: Store,
        max_leases: int | None,
        *,
        granted: Journal = nothing,
        ended: Journal = nothing,
    ) -> None:
        """``store``: whose ``delete`` and ``set_member`` remove an ended lease's records; ``granted`` and
        ``ended``: what it journals then."""
        self._store = store
        self.table = LeaseTable(max_leases)
        """The leases (the store attaches records to them; read by the metrics and by tests)."""
        self._granted, self._ended = granted, ended
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._fires_at = math.inf
        """When the timer should fire (the table's clock): a deadline, or the end of a held loop's grace."""
        self._ending: set[asyncio.Task[None]] = set()

    # -- the lease calls -----------------------------------------------

    async def grant(self, namespace: str, ttl: float) -> LeaseState:
        lease = self.table.grant(namespace, ttl)
        try:
            await self._granted(lease)
        except BaseException:
            self.table.forget(lease)
            raise
        self.arm()
        return self.table.state(lease)

    async def keepalive(self, namespace: str, lease: str) -> LeaseState:
        # Only the deadline moves: its heap entry is pushed again when it comes due. Its records
        # are not copied: a keepalive's reply names the lease and its TTL only.
        kept = self.table.keepalive(namespace, lease)
        return LeaseState(kept.id, kept.namespace, kept.ttl, kept.ttl)

    async def read(self, namespace: str, lease: str) -> LeaseState:
        return self.table.state(self.table.find(namespace, lease))

    async def revoke(self, namespace: str, lease: str) -> LeaseState:
        ended = self.table.revoke(namespace, lease)
        state = LeaseState(ended.id, ended.namespace, ended.ttl, 0.0, tuple(ended.targets))
        await self._end(ended)
        log.info(
            "revoked lease %s: deleted its %d record(s)",
            ended.id,
            len(ended.targets),
            extra={"namespace": namespace},
        )
        return state

    async def leases_of(self, targets: Sequence[Target]) -> list[HeldLease | None]:
        lease_of = self.table.lease_of
        return [lease_of(target) for target in targets]

    def figures(self) -> tuple[int, int, int]:
        table = self.table
        return len(table), table.expired, table.revoked

    # -- the timer -------------------------------------------------------

    def arm(self) -> None:
        """Set the one timer for the heap's first deadline, unless it is set for one as early."""
        at = self.table.next_deadline()
        if at is None or at >= self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, at - self.table.clock())
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)
        self._timer_at = self._fires_at = at

    def _fire(self) -> None:
        grace = grace_after_held_loop(self.table.clock() - self._fires_at)
        if grace:
            # Held past the deadline: the keepalives that waited run first (store.leases says why).
            self._timer = asyncio.get_running_loop().call_later(grace, self._fire)
            self._fires_at = self.table.clock() + grace
            return
        self._timer, self._timer_at, self._fires_at = None, math.inf, math.inf
        ended = self.table.due()
        if ended:
            task = asyncio.get_running_loop().create_task(self._expire(ended))
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)
        self.arm()

    async def _expire(self, ended: list[Lease]) -> None:
        await asyncio.gather(*(self._expire_one(lease) for lease in ended))

    async def _expire_one(self, lease: Lease) -> None:
        try:
            await self._end(lease)
        except Exception:
            log.exception("lease %s expired, but its records could not all be deleted", lease.id)
            return
        log.info(
            "lease %s expired: deleted its %d record(s)",
            lease.id,
            len(lease.targets),
            extra={"namespace": lease.namespace},
        )

    async def _end(self, lease: Lease) -> None:
        """Delete every record still on ``lease``, as an unregister does, then journal its end."""
        table, store = self.table, self._store
        for target in list(lease.targets):
            if not table.holds(lease, target):
                continue  # registered again since, under another lease or none
            key, member = target
            if member is None:
                await store.delete(key)
            else:
                await store.set_member(key, member, present=False)
        await self._ended(lease)

    async def close(self) -> None:
        """Stop the timer and finish the deletions under way (before the store closes)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at, self._fires_at = None, math.inf, math.inf
        if self._ending:
            await asyncio.gather(*self._ending, return_exceptions=True)
