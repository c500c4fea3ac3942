"""The lease model of a store kept in this process: leases, what each holds, and one heap of deadlines.

Theory of operation
-------------------
A lease (SPEC section 9) has an id, the namespace it was granted in, a TTL
and a deadline on a monotonic clock. It holds *targets*: a per-rank record's
key, or one member (an encoder URL) of a set record. A target is held by at
most one lease (``owner``); attaching it to another lease, or to none, moves
it, which is what registering a record again does.

Every deadline sits in one heap, one entry per lease, so a hundred thousand
leases cost a dict entry, a heap entry and a small object each, and no task
or timer of their own. A keepalive only moves the lease's deadline: its heap
entry is left where it is, and when that entry comes due (:meth:`due`) the
lease is found alive and its entry pushed again at its new deadline. So a
keepalive is O(1), and a lease kept alive costs one heap step per TTL. A
revoked lease's entry is skipped when it comes due (its id is gone), and the
heap is rebuilt when such entries outnumber the live ones.

A lease that expires or is revoked leaves the table at once; its targets
still name it as their owner until the store has deleted them, so a target
registered again meanwhile (under another lease or none) has a new owner and
is not deleted (:meth:`holds`). Nothing here does I/O or touches the loop:
``store.local_leases`` runs the one timer and the deletions.
"""

from __future__ import annotations

import heapq
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..exceptions import LeaseNotFound
from .limits import lease_share, too_many_leases, too_many_leases_in
from .records import HeldLease, LeaseState, Target

__all__ = ["HELD_LOOP", "Lease", "LeaseTable", "grace_after_held_loop"]

HELD_LOOP = 0.05
"""Seconds late past which a lease timer counts its loop as held (a long parse, a stalled disk)."""
_MOST_GRACE = 1.0
"""The longest an expiry waits for the requests a held loop kept in their sockets."""


def grace_after_held_loop(late: float) -> float:
    """How long an expiry that ran ``late`` seconds after it was due waits before it ends a lease.

    A loop held past a deadline runs its due timers in the same turn as it reads the sockets, and a
    request's handler one turn later: the expiry would beat a keepalive that arrived before the
    deadline, and a worker that was only slow would lose its records. So a late expiry looks again
    once the requests that waited have run (as long as it was late, a second at most; 0: on time).
    """
    return 0.0 if late <= HELD_LOOP else min(late, _MOST_GRACE)


@dataclass(slots=True, eq=False)
class Lease:
    """One lease held by a local store."""

    id: str
    namespace: str
    ttl: float
    deadline: float
    """When it expires unless kept alive, on the table's clock."""
    armed: float
    """The deadline its heap entry was pushed with."""
    targets: dict[Target, None] = field(default_factory=dict)
    """What it holds, in order of attachment (a dict as an ordered set)."""


class LeaseTable:
    """Every lease of a local store, who holds each target, and the heap of deadlines."""

    def __init__(self, max_leases: int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_leases = max_leases
        self.clock = clock
        self._leases: dict[str, Lease] = {}
        self._owner: dict[Target, str] = {}
        self._heap: list[tuple[float, str]] = []
        self._in: dict[str, int] = {}
        """Leases held, by namespace: each namespace's share (``limits.lease_share``)."""
        self.expired = 0
        """Leases that ran out, since the table was made."""
        self.revoked = 0
        """Leases revoked, since the table was made."""

    def __len__(self) -> int:
        return len(self._leases)

    def leases(self) -> list[Lease]:
        return list(self._leases.values())

    # -- granting and reading ------------------------------------------

    def grant(self, namespace: str, ttl: float, lease_id: str | None = None, *, limit: bool = True) -> Lease:
        """A new lease (``lease_id`` when reloading one); ``TooManyLeases`` past ``max_leases`` (if ``limit``)."""
        if limit and self.max_leases is not None:
            held, here = len(self._leases), self._in.get(namespace, 0)
            if held >= self.max_leases:
                raise too_many_leases(held)
            if here >= (share := lease_share(self.max_leases, held, here)):
                raise too_many_leases_in(namespace, here, share)
        while lease_id is None or lease_id in self._leases:
            lease_id = secrets.token_hex(8)
        deadline = self.clock() + ttl
        lease = Lease(lease_id, namespace, ttl, deadline, deadline)
        self._leases[lease_id] = lease
        self._in[namespace] = self._in.get(namespace, 0) + 1
        heapq.heappush(self._heap, (deadline, lease_id))
        return lease

    def find(self, namespace: str, lease_id: str) -> Lease:
        """The live lease ``lease_id`` of ``namespace``; ``LeaseNotFound`` when there is none."""
        lease = self._leases.get(lease_id)
        if lease is None or lease.namespace != namespace:
            raise LeaseNotFound(lease_id)
        return lease

    def live(self, lease_id: str | None) -> Lease | None:
        """The live lease ``lease_id``, in any namespace, or ``None``."""
        return None if lease_id is None else self._leases.get(lease_id)

    def forget(self, lease: Lease) -> None:
        """Take out a lease just granted that could not be kept (its journal line failed)."""
        if self._leases.get(lease.id) is lease:
            self._drop(lease)

    def keepalive(self, namespace: str, lease_id: str) -> Lease:
        """Give the lease its full TTL again, from now."""
        lease = self.find(namespace, lease_id)
        lease.deadline = self.clock() + lease.ttl
        return lease

    def state(self, lease: Lease) -> LeaseState:
        remaining = max(0.0, lease.deadline - self.clock())
        return LeaseState(lease.id, lease.namespace, lease.ttl, remaining, tuple(lease.targets))

    def lease_of(self, target: Target) -> HeldLease | None:
        """The live lease holding ``target``, its seconds remaining and its TTL, or ``None``."""
        lease = self._leases.get(self._owner.get(target, ""))
        return None if lease is None else (lease.id, max(0.0, lease.deadline - self.clock()), lease.ttl)

    # -- attaching -----------------------------------------------------

    def attach(self, target: Target, lease: Lease | None) -> None:
        """``target`` is now held by ``lease``, or by none: it leaves any lease that held it."""
        old = self._owner.pop(target, None)
        if old is not None:
            holder = self._leases.get(old)
            if holder is not None:
                holder.targets.pop(target, None)
        if lease is not None:
            self._owner[target] = lease.id
            lease.targets[target] = None

    def holds(self, lease: Lease, target: Target) -> bool:
        """Whether ``target`` is still ``lease``'s (not registered again since the lease ended)."""
        return self._owner.get(target) == lease.id

    # -- ending --------------------------------------------------------

    def revoke(self, namespace: str, lease_id: str) -> Lease:
        """Take the lease out of the table now; its targets are the caller's to delete."""
        lease = self.find(namespace, lease_id)
        self._drop(lease)
        self.revoked += 1
        if len(self._heap) > 2 * len(self._leases) + 1024:
            # Revoked leases' entries would wait for their deadlines: rebuild without them.
            self._heap = [(live.armed, live.id) for live in self._leases.values()]
            heapq.heapify(self._heap)
        return lease

    def due(self) -> list[Lease]:
        """Take out every lease whose deadline has passed; push those kept alive again."""
        now = self.clock()
        heap, leases, ended = self._heap, self._leases, []
        while heap and heap[0][0] <= now:
            armed, lease_id = heapq.heappop(heap)
            lease = leases.get(lease_id)
            if lease is None or lease.armed != armed:
                continue  # revoked (or granted again under the same id on reload)
            if lease.deadline > now:
                lease.armed = lease.deadline
                heapq.heappush(heap, (lease.deadline, lease_id))
                continue
            self._drop(lease)
            ended.append(lease)
        self.expired += len(ended)
        return ended

    def _drop(self, lease: Lease) -> None:
        """Take ``lease`` out of the table and of its namespace's count."""
        del self._leases[lease.id]
        left = self._in[lease.namespace] - 1
        if left:
            self._in[lease.namespace] = left
        else:
            del self._in[lease.namespace]

    def next_deadline(self) -> float | None:
        """When the heap's first entry comes due (perhaps a lease kept alive since), or ``None``."""
        return self._heap[0][0] if self._heap else None

    def renew_all(self) -> None:
        """Give every lease its full TTL again from now (a store reloaded after a restart)."""
        now = self.clock()
        for lease in self._leases.values():
            lease.deadline = lease.armed = now + lease.ttl
        self._heap = [(lease.armed, lease.id) for lease in self._leases.values()]
        heapq.heapify(self._heap)
