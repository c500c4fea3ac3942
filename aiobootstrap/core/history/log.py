"""One namespace's log of changes, and what a watcher after a version finds in it (see the package's notes)."""

from __future__ import annotations

import asyncio
import bisect
import collections
import heapq
from collections.abc import Iterable

from .change import LoggedChange
from .filters import Match, Parked, every

__all__ = ["CHANGE_BYTES", "MAX_REPLY_CHANGES", "Match", "WaitEnd", "change_bytes", "shed_largest"]

MAX_REPLY_CHANGES = 10_000
"""The most changes one reply carries; its ``version`` is then the last one's, and the rest come next."""

CHANGE_BYTES = 160
"""What a kept change costs less its texts: the object, its version and rank, its slot in the log
(``tracemalloc``: 160 bytes a change of a rank with a shared role)."""
_TEXT_BYTES = 49
"""A text's own cost beside its characters (a ``str``'s header, for ASCII)."""


def change_bytes(change: LoggedChange) -> int:
    """What keeping ``change`` costs, about (the watch history's memory budget counts it so)."""
    size = CHANGE_BYTES
    for text in (change.role, change.name, change.member):
        if text is not None:
            size += _TEXT_BYTES + len(text)
    return size


_every = every


class WaitEnd:
    """A parked watch's own reason to stop waiting, besides a change and its time (see ``History.since``).

    Its owner calls :meth:`end` (the server's fast path, once it has answered
    the watch itself): the watch's wait is over at once, as if its time ran out.
    """

    __slots__ = ("ended", "parked")

    def __init__(self) -> None:
        self.ended = False
        self.parked: asyncio.Future[None] | None = None
        """What the watch waits on while parked (the history sets it)."""

    def end(self) -> None:
        self.ended = True
        parked = self.parked
        if parked is not None and not parked.done():
            parked.set_result(None)


class _Log:
    __slots__ = ("bytes", "changes", "floor", "kept", "parked", "watchers")

    def __init__(self, floor: int, *, kept: bool = True) -> None:
        self.changes: collections.deque[LoggedChange] = collections.deque()
        self.floor = floor
        """Every change with a version above this is in ``changes``."""
        self.parked: Parked[asyncio.Future[None]] = Parked()
        """One future per parked watch (rather than one event for all: a :class:`WaitEnd` ends one of them),
        by its filter: a change wakes only the watches it matches (:meth:`wake`)."""
        self.watchers = 0
        self.kept = kept
        """``False`` for a log made by a watcher and never changed: dropped with its last watcher."""
        self.bytes = 0
        """What its changes cost (:func:`change_bytes`), for the history's memory budget."""

    @property
    def high(self) -> int:
        """The newest version the log knows of."""
        return max(self.changes[-1].version, self.floor) if self.changes else self.floor

    def after(self, version: int) -> list[LoggedChange]:
        """The changes above ``version``, oldest first (scanned from the newest: watchers are near the tail)."""
        found: list[LoggedChange] = []
        for change in reversed(self.changes):
            if change.version <= version:
                break
            found.append(change)
        found.reverse()
        return found

    def add(self, change: LoggedChange, limit: int) -> int:
        """Keep ``change`` (its oldest past ``limit`` dropped); what the log's cost moved by, in bytes."""
        changes = self.changes
        if change.version <= self.floor:
            return 0  # heard already, or older than what the log vouches for
        if not changes or changes[-1].version < change.version:
            changes.append(change)
        else:
            # Out of order (a local write announced before the feed's entry of another): keep the order.
            versions = [item.version for item in changes]
            at = bisect.bisect_left(versions, change.version)
            if at < len(versions) and versions[at] == change.version:
                return 0
            changes.insert(at, change)
        # change_bytes(change), written out: every write takes this step.
        size = CHANGE_BYTES + _TEXT_BYTES + len(change.role)
        if change.name is not None:
            size += _TEXT_BYTES + len(change.name)
        if change.member is not None:
            size += _TEXT_BYTES + len(change.member)
        self.bytes += size
        held = len(changes)
        if held <= limit:
            return size
        if held > limit + 1:
            return size - self.shed(held - limit)
        # One past the limit, every change of a full log: its oldest goes (shed(1), written out).
        dropped = changes.popleft()
        if dropped.version > self.floor:
            self.floor = dropped.version
        freed = CHANGE_BYTES + _TEXT_BYTES + len(dropped.role)
        if dropped.name is not None:
            freed += _TEXT_BYTES + len(dropped.name)
        if dropped.member is not None:
            freed += _TEXT_BYTES + len(dropped.member)
        self.bytes -= freed
        return size - freed

    def shed(self, count: int) -> int:
        """Drop the ``count`` oldest changes (the floor rises past them); the bytes freed."""
        changes, freed = self.changes, 0
        for _ in range(min(count, len(changes))):
            dropped = changes.popleft()
            self.floor = max(self.floor, dropped.version)
            freed += change_bytes(dropped)
        self.bytes -= freed
        return freed

    def park(self, match: Match = _every) -> asyncio.Future[None]:
        """A future :meth:`wake` resolves for a change ``match`` accepts; its parker drops it (:meth:`unpark`)
        when it stops waiting."""
        parked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.parked.add(parked, match)
        return parked

    def unpark(self, parked: asyncio.Future[None]) -> None:
        self.parked.remove(parked)

    def wake(self, changes: list[LoggedChange] | None = None) -> int:
        """Wake the watches parked for one of ``changes`` (just added); ``None``: every watch (the floor
        moved, a resync, the close: each must look again).

        A watch whose filter none of them matches stays parked: with thousands parked with filters of
        their own, a change wakes the few it concerns, not every watch of the namespace to look and park
        again (issue 41, item 11: 3,000 such watches cut registrations from 774 a second to 10).
        """
        if not self.parked:
            return 0  # nobody parked (a write's common case): no new dict
        if changes is None:
            woken = list(self.parked)
            self.parked = Parked()
        else:
            woken = self.parked.matching(changes)
            for future in woken:
                self.parked.remove(future)
        for future in woken:
            if not future.done():
                future.set_result(None)
        return len(woken)


_SHED_BATCH = 64
"""Changes dropped from the largest log at a time while shedding, before it is weighed again."""


def shed_largest(logs: Iterable[_Log], excess: int) -> int:
    """Drop the oldest changes of the largest of ``logs`` until ``excess`` bytes are freed; the bytes freed.

    The largest first, evened out: the busiest namespaces lose the changes
    their watchers were least likely to still ask for (a watch from before
    the new floor is a ``410``, and its client reads the listing again).
    """
    heap = [(-log.bytes, order, log) for order, log in enumerate(logs) if log.changes]
    heapq.heapify(heap)
    freed = 0
    while freed < excess and heap:
        _, order, log = heapq.heappop(heap)
        freed += log.shed(_SHED_BATCH)
        if log.changes:
            heapq.heappush(heap, (-log.bytes, order, log))
    return freed


def _found(log: _Log, after: int, match: Match) -> tuple[list[LoggedChange], int] | None:
    """The changes of ``log`` above ``after`` that ``match`` and the version to ask after next; ``None``: none."""
    found = [change for change in log.after(after) if match(change)]
    if len(found) > MAX_REPLY_CHANGES:
        found = found[:MAX_REPLY_CHANGES]
        return found, found[-1].version
    return (found, log.high) if found else None
