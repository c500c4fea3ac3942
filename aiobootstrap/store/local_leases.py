"""Leases on a store kept in this process (memory, file): the lease calls, the one timer, the deletions.

Theory of operation
-------------------
The leases and their heap of deadlines are a :class:`~.leases.LeaseTable`.
One ``loop.call_later`` handle is set for the heap's first deadline; when it
fires, every lease due leaves the table at once, one task deletes the records
of all of them, and the handle is set again for the next deadline. No lease
has a task or a timer of its own, and a keepalive touches neither.

A lease's records are deleted through the store's own :meth:`delete` and
:meth:`set_member`, exactly as an unregister deletes them: a change with a
new version each, on the feed, so waiters (and watchers) are told. A record
registered again since the lease ended has another owner and is left alone.
Revoking does the same at once, and answers when the deletions are done.

The subclass attaches records as it writes them (``self._leases.attach``),
and journals what it must (:meth:`_lease_granted`, :meth:`_lease_ended`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence

from .interface import LeaseState, StoreLimits, Target
from .leases import Lease, LeaseTable
from .tables import LocalStore

__all__ = ["LocalLeases"]

log = logging.getLogger("aiobootstrap")


class LocalLeases(LocalStore):
    """A :class:`LocalStore` that holds leases: the memory store and the file store stand on it."""

    def __init__(self, limits: StoreLimits | None) -> None:
        super().__init__(limits)
        self._leases = LeaseTable(self._tables.limits.max_leases)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._ending: set[asyncio.Task[None]] = set()

    @property
    def lease_table(self) -> LeaseTable:
        """The leases (read by the metrics and by tests)."""
        return self._leases

    # -- the lease calls -----------------------------------------------

    async def grant_lease(self, namespace: str, ttl: float) -> LeaseState:
        lease = self._leases.grant(namespace, ttl)
        try:
            await self._lease_granted(lease)
        except BaseException:
            self._leases.forget(lease)
            raise
        self._arm()
        return self._leases.state(lease)

    async def keepalive_lease(self, namespace: str, lease: str) -> LeaseState:
        # Only the deadline moves: its heap entry is pushed again when it comes due. Its records
        # are not copied: a keepalive's reply names the lease and its TTL only.
        kept = self._leases.keepalive(namespace, lease)
        return LeaseState(kept.id, kept.namespace, kept.ttl, kept.ttl)

    async def read_lease(self, namespace: str, lease: str) -> LeaseState:
        return self._leases.state(self._leases.find(namespace, lease))

    async def revoke_lease(self, namespace: str, lease: str) -> LeaseState:
        ended = self._leases.revoke(namespace, lease)
        state = LeaseState(ended.id, ended.namespace, ended.ttl, 0.0, tuple(ended.targets))
        await self._end(ended)
        log.info(
            "revoked lease %s: deleted its %d record(s)",
            ended.id,
            len(ended.targets),
            extra={"namespace": namespace},
        )
        return state

    def leases_of(self, targets: Sequence[Target]) -> list[tuple[str, float] | None]:
        lease_of = self._leases.lease_of
        return [lease_of(target) for target in targets]

    def lease_figures(self) -> tuple[int, int, int] | None:
        table = self._leases
        return len(table), table.expired, table.revoked

    # -- what a subclass journals (nothing, in memory) ------------------

    async def _lease_granted(self, lease: Lease) -> None:
        """``lease`` was granted: make it durable before it is answered."""

    async def _lease_ended(self, lease: Lease) -> None:
        """``lease`` ended and its records are deleted."""

    # -- the timer -------------------------------------------------------

    def _arm(self) -> None:
        """Set the one timer for the heap's first deadline, unless it is set for one as early."""
        at = self._leases.next_deadline()
        if at is None or at >= self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, at - self._leases.clock())
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)
        self._timer_at = at

    def _fire(self) -> None:
        self._timer, self._timer_at = None, math.inf
        ended = self._leases.due()
        if ended:
            task = asyncio.get_running_loop().create_task(self._expire(ended))
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)
        self._arm()

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
        for target in list(lease.targets):
            if not self._leases.holds(lease, target):
                continue  # registered again since, under another lease or none
            key, member = target
            if member is None:
                await self.delete(key)
            else:
                await self.set_member(key, member, present=False)
        await self._lease_ended(lease)

    async def _close_leases(self) -> None:
        """Stop the timer and finish the deletions under way (before the store closes)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = None, math.inf
        if self._ending:
            await asyncio.gather(*self._ending, return_exceptions=True)
