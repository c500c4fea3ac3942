"""The watch history: every change of every namespace, kept in order, and the watchers parked on it.

Theory of operation
-------------------
The store announces every change it applies on its feed (``store/interface``);
the history hears the feed beside the registry (:func:`listeners`), or, where
the feed tells this process's writes first (Redis), the store's own order
(``Store.follow_in_order``), and keeps,
per namespace, a *log*: the last ``limit`` changes as
:class:`~aiobootstrap.wire.WatchedChange`, oldest first, and a *floor*: every
change of the namespace with a version above the floor is in the log. A
watch that asks for the changes after a version below the floor cannot be
answered whole: that is :class:`~aiobootstrap.exceptions.HistoryGone` (a
``410``).

A log is made for every namespace holding records when the history opens
(its floor: the namespace's version then), and for any other namespace by
its first change heard or its first watcher: its floor is then the store's
floor at open (a namespace that held nothing then has had no change since
that the history did not hear; what it had before is numbered at or below
that floor). After the feed said it may have missed changes (below), nothing
is vouched for: a log made by a change has that version less one for floor,
one made by a watcher the namespace's version as the store says it then (a
change on its way at or below it is dropped). Trimming the oldest change
raises the floor to its version. So the floor is never below a change the
history did not hear.

An encoder list change is one set record's new value (``Store.set_member``):
the history diffs it against the members it last knew for the namespace (read
at :meth:`History.open`, then kept from every change) and reports the URL that
joined (``put``) or left (``delete``). A change that comes without its record
(one made through another process sharing a Redis store carries only its key)
cannot be diffed: the floor rises to its version, so a watcher behind it is
told ``410`` and re-reads the list, never a wrong URL.

The feed saying it may have missed changes (:meth:`History.resync`) drops
every log: each is made again as above, so a watcher that may have missed a
change is told ``410``. (Over Redis that is every reconnect of the feed, and
a replica's history begins when it starts.)

Watchers park on their log's event, which a change sets and replaces (never
``clear()``-ed); the event is taken before the log is read, so no change slips
between. A log made by a watcher and never changed is dropped with its last
watcher (made again, it vouches for the same), so probing namespaces leaves
nothing behind. :meth:`History.close` wakes every
watcher with :class:`~aiobootstrap.exceptions.ShuttingDown`.

This module is pure asyncio: it knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
from collections.abc import Callable, Sequence

from ._names import DEFAULT_ROLE, ENCODER_URLS
from .exceptions import HistoryGone, ShuttingDown
from .store import Change, ChangeListener, Key, Store, members_of
from .wire import WatchedChange

__all__ = ["DEFAULT_WATCH_HISTORY", "MAX_REPLY_CHANGES", "History", "Match", "listeners"]

DEFAULT_WATCH_HISTORY = 100_000
"""Changes kept per namespace (``--watch-history``)."""

MAX_REPLY_CHANGES = 10_000
"""The most changes one reply carries; its ``version`` is then the last one's, and the rest come next."""

Match = Callable[[WatchedChange], bool]
"""A watcher's filter: which changes it wants."""


def _every(change: WatchedChange) -> bool:
    return True


_NO_NAMESPACE = ""
"""No namespace's name: its version is the store's floor (what a namespace's first change numbers above)."""


class _Log:
    __slots__ = ("changes", "event", "floor", "kept", "watchers")

    def __init__(self, floor: int, *, kept: bool = True) -> None:
        self.changes: collections.deque[WatchedChange] = collections.deque()
        self.floor = floor
        """Every change with a version above this is in ``changes``."""
        self.event = asyncio.Event()
        self.watchers = 0
        self.kept = kept
        """``False`` for a log made by a watcher and never changed: dropped with its last watcher."""

    @property
    def high(self) -> int:
        """The newest version the log knows of."""
        return max(self.changes[-1].version, self.floor) if self.changes else self.floor

    def after(self, version: int) -> list[WatchedChange]:
        """The changes above ``version``, oldest first (scanned from the newest: watchers are near the tail)."""
        found: list[WatchedChange] = []
        for change in reversed(self.changes):
            if change.version <= version:
                break
            found.append(change)
        found.reverse()
        return found

    def add(self, change: WatchedChange, limit: int) -> None:
        changes = self.changes
        if change.version <= self.floor:
            return  # heard already, or older than what the log vouches for
        if not changes or changes[-1].version < change.version:
            changes.append(change)
        else:
            # Out of order (a local write announced before the feed's entry of another): keep the order.
            versions = [item.version for item in changes]
            at = bisect.bisect_left(versions, change.version)
            if at < len(versions) and versions[at] == change.version:
                return
            changes.insert(at, change)
        while len(changes) > limit:
            self.floor = max(self.floor, changes.popleft().version)

    def wake(self) -> None:
        self.event.set()
        self.event = asyncio.Event()


class History:
    """The changes of every namespace of a store, and the watchers waiting for the next."""

    def __init__(self, store: Store, *, limit: int = DEFAULT_WATCH_HISTORY) -> None:
        if limit < 1:
            raise ValueError(f"the watch history must keep at least 1 change, not {limit}")
        self.store = store
        self.limit = limit
        self._logs: dict[str, _Log] = {}
        self._members: dict[str, list[str]] = {}
        """The encoder URLs last known per namespace (to tell which one a list change added or removed)."""
        self._unknown: set[str] | None = set()
        """Namespaces whose encoder URLs are not known (a change came without its value); ``None``: all."""
        self._start: int | None = None
        """The store's floor at open; ``None`` before, and once the feed may have missed a change."""
        self._watchers = 0
        self._closed = False

    @property
    def watchers(self) -> int:
        """How many watches are parked right now (long-polls and streams between events)."""
        return self._watchers

    @property
    def closed(self) -> bool:
        return self._closed

    def heard(self, namespace: str) -> int | None:
        """The newest version of ``namespace`` the history has heard of; ``None`` when it keeps no log of it.

        Over Redis a write is heard when the stream brings it, a moment after it was acknowledged.
        """
        log = self._logs.get(namespace)
        return None if log is None else log.high

    async def open(self) -> None:
        """Read where each namespace stands, and its encoder list (once the feed runs, before serving)."""
        store = self.store
        namespaces = await store.namespaces()
        start = await store.version(_NO_NAMESPACE)
        for namespace in namespaces:
            self._logs.setdefault(namespace, _Log(await store.version(namespace)))
            record = await store.get(Key(namespace, ENCODER_URLS, DEFAULT_ROLE, 0))
            if record is not None and namespace not in self._members:
                self._members[namespace] = members_of(record.value)
        self._start = start

    def close(self) -> None:
        """Wake every watcher with :class:`ShuttingDown`; refuse new watches."""
        self._closed = True
        for log in self._logs.values():
            log.wake()

    # -- the feed ----------------------------------------------------------

    def changed(self, changes: Sequence[Change]) -> None:
        touched: set[str] = set()
        for change in changes:
            namespace = change.key.namespace
            log = self._logs.get(namespace)
            if log is None:
                start = self._start
                floor = change.version - 1 if start is None else min(start, change.version - 1)
                log = self._logs[namespace] = _Log(floor)
            log.kept = True
            for watched in self._watched(change, log):
                log.add(watched, self.limit)
            touched.add(namespace)
        for namespace in touched:
            self._logs[namespace].wake()

    def resync(self) -> None:
        """The feed may have missed changes: forget every log (its watchers are told ``410``)."""
        logs, self._logs = self._logs, {}
        self._members.clear()
        self._unknown = None
        self._start = None
        for log in logs.values():
            log.wake()

    def _watched(self, change: Change, log: _Log) -> list[WatchedChange]:
        key = change.key
        if key.kind != ENCODER_URLS:
            return [
                WatchedChange(
                    "delete" if change.deleted else "put",
                    key.kind,
                    change.version,
                    role=key.role,
                    rank=key.rank,
                )
            ]
        if key.role != DEFAULT_ROLE:
            # The evicted set (encoder_health), not the list: diffed as the list, a revival read as a delete.
            return []
        namespace = key.namespace
        if change.record is None:
            # No value to diff: nobody behind this version can be told exactly what changed.
            self._members.pop(namespace, None)
            if self._unknown is not None:
                self._unknown.add(namespace)
            log.floor = max(log.floor, change.version)
            return []
        after = members_of(change.record.value)
        unknown = self._unknown
        if (unknown is None and namespace not in self._members) or (unknown and namespace in unknown):
            # What it changed from is not known: the same as above, and known from here on.
            self._members[namespace] = after
            if unknown:
                unknown.discard(namespace)
            log.floor = max(log.floor, change.version)
            return []
        before = self._members.get(namespace, [])
        self._members[namespace] = after
        kept = set(after)
        gone = [url for url in before if url not in kept]
        had = set(before)
        joined = [url for url in after if url not in had]
        return [WatchedChange("delete", ENCODER_URLS, change.version, url=url) for url in gone] + [
            WatchedChange("put", ENCODER_URLS, change.version, url=url) for url in joined
        ]

    # -- watching ----------------------------------------------------------

    async def since(
        self, namespace: str, after: int, timeout: float, match: Match | None = None
    ) -> tuple[list[WatchedChange], int]:
        """The changes of ``namespace`` above ``after`` that ``match``, oldest first, waiting up to ``timeout``.

        Returns them (at most :data:`MAX_REPLY_CHANGES`; none when the time ran
        out) and the version to ask after next. Raises :class:`HistoryGone`
        when the history no longer reaches back to ``after``.
        """
        match = _every if match is None else match
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        seen = after
        while True:
            if self._closed:
                raise ShuttingDown()
            log = await self._log(namespace)
            if after < log.floor:
                raise HistoryGone(
                    f"The server's watch history of this namespace starts after version {log.floor}; "
                    f"changes after {after} are gone: read the listing, then watch from its version.",
                    log.high,
                )
            event = log.event
            fresh = log.after(seen)
            found = [change for change in fresh if match(change)]
            if len(found) > MAX_REPLY_CHANGES:
                found = found[:MAX_REPLY_CHANGES]
                return found, found[-1].version
            if found:
                return found, log.high
            seen = max(seen, log.high)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return [], seen
            if not await self._park(namespace, log, event, remaining):
                return [], max(seen, log.high)

    async def _log(self, namespace: str) -> _Log:
        log = self._logs.get(namespace)
        if log is not None:
            return log
        floor = self._start
        if floor is None:
            floor = await self.store.version(namespace)
        # A change heard during the read made the log already.
        return self._logs.setdefault(namespace, _Log(floor, kept=False))

    async def _park(self, namespace: str, log: _Log, event: asyncio.Event, timeout: float) -> bool:
        """Wait for ``event``; ``False`` when ``timeout`` ran out first."""
        log.watchers += 1
        self._watchers += 1
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
            return True
        except TimeoutError:
            return False
        finally:
            log.watchers -= 1
            self._watchers -= 1
            if not log.watchers and not log.kept and self._logs.get(namespace) is log:
                del self._logs[namespace]


def listeners(*listening: ChangeListener) -> ChangeListener:
    """One listener that hands the store's feed to each of ``listening``, in order."""

    class _All:
        def changed(self, changes: Sequence[Change]) -> None:
            for listener in listening:
                listener.changed(changes)

        def resync(self) -> None:
            for listener in listening:
                listener.resync()

    return _All()
