"""The watch history: every change of every namespace, kept in order, and the watchers parked on it.

Theory of operation
-------------------
The store announces every change it applies on its feed (``store/interface``);
the history hears the feed beside the registry (:func:`listeners`), or in the
store's own order (``Store.follow_in_order``, Redis), and keeps, per
namespace, a *log*: the last ``limit`` changes as
:class:`~.change.LoggedChange`, oldest first, and a *floor*: every
change of the namespace with a version above the floor is in the log. A
watch that asks for the changes after a version below the floor cannot be
answered whole: that is :class:`~aiobootstrap.exceptions.HistoryGone` (a
``410``).

A log is made for every namespace holding records when the history opens (its floor: the namespace's version
then), and for any other namespace by its first change heard or its first watcher: its floor is then the
store's floor at open (a namespace that held nothing then has had no change since that the history did not
hear; what it had before is numbered at or below that floor). After the feed said it may have missed changes
(below), nothing is vouched for: a log made by a change has that version less one for floor, one made by a
watcher the namespace's version as the store says it then (a change on its way at or below it is dropped).
Trimming the oldest change raises the floor to its version. So the floor is never below a change the history
did not hear.

The history logs store-level changes (``change``): a record put or deleted, by its key (a rank's, or a named
record's name), or a set record's member added or removed (``Change.member``, which every store tells with the
change: no diff; one that names none, which an older replica's Redis entry may, raises the log's floor: a
watcher behind it is told ``410``, never a guess). Its host may say which changes its watchers are told of at
all (``shown``; the encoder face's evicted set is shown to nobody): the others are not kept, and wake no
watcher. How a change is shown on the wire is the host's, per kind.

The feed saying it may have missed changes (:meth:`History.resync`) drops every log: each is made again as
above, so a watcher that may have missed a change is told ``410`` (over Redis: every reconnect of the feed).

Watchers park on a future of their own, kept by their log by filter (``filters``), which a change resolves
when it matches the filter (its floor moved, or the close: every one); a watch parks in the step that read the
log, so no change slips between. Its owner may end its wait too (:class:`WaitEnd`: the fast path, having
answered it itself). Just before a change wakes its log, :attr:`History.changed_namespaces`' listeners hear
the namespace (``server/fastpath/watches.py`` answers its groups from :meth:`History.now`). A parked watch
counts against ``--max-waiters``; a stream (:meth:`History.hold`) once.

A namespace the store forgot (its last record deleted) has its log freed once nobody watches it and its grace
has passed (``forgetting``). A log made by a watcher and never changed is dropped with its last watcher, so
probing namespaces leaves nothing behind. All logs together keep within a memory budget (``memory``): past it
the largest lose their oldest changes first. :meth:`History.close` wakes every watcher with
:class:`~aiobootstrap.exceptions.ShuttingDown`.

This module is pure asyncio: it knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection, Iterator, Sequence

from ...exceptions import HistoryGone, ShuttingDown, StoreUnavailable
from ...store import Change, Store
from ..parking import Parking
from ..subscribers import NamespaceListener, Subscribers
from .change import LoggedChange, Op, logged
from .fanout import listeners
from .filters import Filter, Match
from .forgetting import Forgetting
from .log import MAX_REPLY_CHANGES, WaitEnd, _every, _found, _Log, shed_largest

__all__ = [
    "DEFAULT_WATCH_HISTORY",
    "DEFAULT_WATCH_HISTORY_MEMORY",
    "MAX_REPLY_CHANGES",
    "Filter",
    "History",
    "LoggedChange",
    "Match",
    "WaitEnd",
    "listeners",
]

DEFAULT_WATCH_HISTORY = 100_000
"""Changes kept per namespace (``--watch-history``)."""
DEFAULT_WATCH_HISTORY_MEMORY = 256 * 1024 * 1024
"""Bytes all namespaces' kept changes may cost together (``--watch-history-memory``)."""
_SHED_TO = 0.9
"""Past the budget, changes are dropped until this share of it is left, so the next ones do not each drop one."""

_NO_NAMESPACE = ""
"""No namespace's name: its version is the store's floor (what a namespace's first change numbers above)."""


class History:
    """The changes of every namespace of a store, and the watchers waiting for the next."""

    def __init__(
        self,
        store: Store,
        *,
        limit: int = DEFAULT_WATCH_HISTORY,
        memory: int = DEFAULT_WATCH_HISTORY_MEMORY,
        parking: Parking | None = None,
        shown: Callable[[LoggedChange], bool] | None = None,
        sets: Collection[str] = (),
    ) -> None:
        """``limit``: changes kept per namespace; ``memory``: bytes all may cost (``_shed``); ``parking``: where
        the watches count against the server's limit of waiting requests; ``shown``: whether watchers are shown
        a change at all (``None``: every one); ``sets``: the kinds whose records are sets of members."""
        if limit < 1:
            raise ValueError(f"the watch history must keep at least 1 change, not {limit}")
        if memory < 1:
            raise ValueError(f"the watch history's memory must be at least 1 byte, not {memory}")
        self.store = store
        self.limit = limit
        self.memory = memory
        self.bytes = 0
        """What the kept changes cost now (``log.change_bytes``); at most :attr:`memory` after each change."""
        self._logs: dict[str, _Log] = {}
        self._shown = shown
        self._sets = frozenset(sets)
        self._start: int | None = None
        """The store's floor at open; ``None`` before, and once the feed may have missed a change."""
        self._watchers = 0
        self.woken = 0
        """Parked watches the changes woke, ever: what changes cost the watchers (``filters``)."""
        self._closed = False
        self._parking = parking
        self.changed_namespaces: Subscribers[NamespaceListener] = Subscribers(
            "the history's changed namespaces"
        )
        """Hears each namespace a change touched, before its watchers are woken."""
        self.forgetting = Forgetting()
        self._sweeper: asyncio.Task[None] | None = None
        self._sweep_wake = asyncio.Event()

    @property
    def watchers(self) -> int:
        """How many watches are parked right now (long-polls and streams between events)."""
        return self._watchers

    @property
    def closed(self) -> bool:
        return self._closed

    def latest(self, namespace: str) -> int | None:
        """The newest version of ``namespace`` the history has heard of; ``None`` when it keeps no log of it.

        Over Redis a write is heard when the stream brings it, a moment after it was acknowledged.
        """
        log = self._logs.get(namespace)
        return None if log is None else log.high

    async def open(self) -> None:
        """Read where each namespace stands (once the feed runs, before serving)."""
        store = self.store
        namespaces = await store.namespaces()
        start = await store.version(_NO_NAMESPACE)
        for namespace in namespaces:
            self._logs.setdefault(namespace, _Log(await store.version(namespace)))
        self._start = start

    def close(self) -> None:
        """Wake every watcher with :class:`ShuttingDown`; refuse new watches."""
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        for log in self._logs.values():
            log.wake()

    # -- the feed ----------------------------------------------------------

    def changed(self, changes: Sequence[Change]) -> None:
        # Each namespace touched: its floor before, and the changes logged (whom they match is woken).
        touched: dict[str, tuple[int, list[LoggedChange]]] = {}
        shown, sets, logs = self._shown, self._sets, self._logs
        for change in changes:
            key = change.key
            namespace = key.namespace
            log = logs.get(namespace)
            if log is None:
                start = self._start
                floor = change.version - 1 if start is None else min(start, change.version - 1)
                log = logs[namespace] = _Log(self.forgetting.floor(namespace, floor))
            added = touched.get(namespace)
            if added is None:
                added = touched[namespace] = (log.floor, [])
            if not log.kept:
                self.forgetting.tombstones.pop(namespace, None)  # the log begins above it
                log.kept = True
            if change.deleted:
                self.forgetting.emptied.add(namespace)
            if change.member is None:
                if sets and key.kind in sets:
                    # A set record's change that names no member (a Redis entry written before entries
                    # named them): nobody behind it can be told exactly what changed, so nobody is told a
                    # guess.
                    log.floor = max(log.floor, change.version)
                    continue
                # What ``logged`` makes of it, made here: this is every write's step.
                op: Op = "delete" if change.deleted else "put"
                entry = LoggedChange(op, key.kind, change.version, key.role, key.rank, key.name)
            else:
                entry = logged(change)
            if shown is None or shown(entry):
                self.bytes += log.add(entry, self.limit)
                added[1].append(entry)
        if self.bytes > self.memory:
            self._shed()
        changed_namespaces = self.changed_namespaces
        forgetting = self.forgetting
        for namespace, (floor, entries) in touched.items():
            if forgetting.forgotten:
                forgetting.revived(namespace)
            for listener in changed_namespaces.listeners:
                try:
                    listener.namespace_changed(namespace)
                except Exception:
                    changed_namespaces.failed()
            log = self._logs[namespace]
            # The floor moved (the log full, a set's change it cannot tell): every watch looks (a 410 for some).
            self.woken += log.wake(None if log.floor != floor else entries)
        if forgetting.emptied and not self._closed:
            if self._sweeper is None:
                self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
            self._sweep_wake.set()

    def resync(self) -> None:
        """The feed may have missed changes: forget every log (its watchers are told ``410``)."""
        logs, self._logs = self._logs, {}
        self.bytes = 0
        self.forgetting.clear()
        self._start = None
        for log in logs.values():
            log.wake()

    def _shed(self) -> None:
        """Back within the memory budget: the largest logs lose their oldest changes (``shed_largest``)."""
        self.bytes -= shed_largest(self._logs.values(), self.bytes - int(self.memory * _SHED_TO))

    # -- watching ----------------------------------------------------------

    async def since(
        self,
        namespace: str,
        after: int,
        timeout: float,
        match: Match | None = None,
        *,
        held: bool = False,
        end: WaitEnd | None = None,
    ) -> tuple[list[LoggedChange], int]:
        """The changes of ``namespace`` above ``after`` that ``match``, oldest first, waiting up to ``timeout``.

        Returns them (at most :data:`MAX_REPLY_CHANGES`; none when the time ran
        out, or ``end`` was ended) and the version to ask after next. Raises
        :class:`HistoryGone` when the history no longer reaches back to
        ``after``, and :class:`TooManyWaiters` when it would park past the
        limit (``held``: the watch counts already, see :meth:`hold`).
        """
        match = _every if match is None else match
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        seen = after
        while True:
            if self._closed:
                raise ShuttingDown()
            log = await self._log(namespace)
            try:
                if after < log.floor:
                    raise HistoryGone(
                        f"The server's watch history of this namespace starts after version {log.floor}; "
                        f"changes after {after} are gone: read the listing, then watch from its version.",
                        log.high,
                    )
                found = _found(log, seen, match)
                if found is not None:
                    return found
                seen = max(seen, log.high)
                remaining = deadline - loop.time()
                if remaining <= 0 or (end is not None and end.ended):
                    return [], seen
                if not await self._park(log, remaining, not held, end, match):
                    return [], max(seen, log.high)
            finally:
                # Made by a watch, never changed: made again, it vouches for the same.
                if not log.watchers and not log.kept and self._logs.get(namespace) is log:
                    del self._logs[namespace]

    async def position(self, namespace: str, after: int) -> int:
        """Where a watch from ``after`` starts: ``after``, or the namespace's version when ``after`` is past
        any it has reached (a mistaken or foreign number, which would skip its changes up to ``after``).

        Asks the store only when ``after`` is past what the history heard: a replica whose feed is a moment
        behind the store still waits above ``after``, which the store has reached.
        """
        log = self._logs.get(namespace)
        if log is not None and after <= log.high:
            return after
        return min(after, await self.store.version(namespace))

    def now(
        self, namespace: str, after: int, match: Match | None, seen: int = -1
    ) -> tuple[list[LoggedChange], int] | None:
        """What :meth:`since` would answer now without waiting; ``None``: it would not so (no log, gone past
        ``after``, closed). ``seen``: how far the caller found nothing; only changes above it are matched."""
        log = self._logs.get(namespace)
        if log is None or after < log.floor or self._closed:
            return None
        found = _found(log, seen := max(after, seen), _every if match is None else match)
        return ([], max(seen, log.high)) if found is None else found

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Count a stream against the limit of waiting requests for as long as it is open (its parks are not)."""
        parking = self._parking
        if parking is not None:
            parking.hold()
        try:
            yield
        finally:
            if parking is not None:
                parking.release()

    async def _log(self, namespace: str) -> _Log:
        log = self._logs.get(namespace)
        if log is not None:
            return log
        floor = self._start
        if floor is None:
            floor = await self.store.version(namespace)
        floor = self.forgetting.floor(namespace, floor)
        # A change heard during the read made the log already.
        return self._logs.setdefault(namespace, _Log(floor, kept=False))

    async def _park(
        self, log: _Log, timeout: float, counted: bool, end: WaitEnd | None, match: Match = _every
    ) -> bool:
        """Wait for the log's next change (or ``end``); ``False`` when ``timeout`` ran out first.
        ``counted``: against the limit."""
        parking = self._parking if counted else None
        if parking is not None:
            parking.hold()
        parked = log.park(match)
        if end is not None:
            end.parked = parked
        log.watchers += 1
        self._watchers += 1
        try:
            async with asyncio.timeout(timeout):
                await parked
            return True
        except TimeoutError:
            return False
        finally:
            if parking is not None:
                parking.release()
            log.unpark(parked)
            if end is not None:
                end.parked = None
            log.watchers -= 1
            self._watchers -= 1

    async def _sweep(self) -> None:
        """Free the logs of the namespaces the store forgot, once due and unwatched (see ``forgetting``)."""
        forgetting, loop = self.forgetting, asyncio.get_running_loop()
        try:
            while True:
                if forgetting.emptied:
                    emptied, forgetting.emptied = forgetting.emptied, set()
                    highs = {name: log.high for name in emptied if (log := self._logs.get(name)) is not None}
                    live = set(await self.store.namespaces())
                    # One changed during the read may hold records the read did not see: its delete asks again.
                    still = [
                        name
                        for name, high in highs.items()
                        if (log := self._logs.get(name)) and log.high == high
                    ]
                    forgetting.seen(still, live, loop.time())
                for name in list(forgetting.due(loop.time())):
                    log = self._logs.get(name)
                    if log is None or not log.kept:
                        continue
                    if log.watchers:
                        forgetting.forgotten[name] = loop.time()  # watched: kept, its grace again
                        continue
                    del self._logs[name]
                    self.bytes -= log.bytes
                    folded = forgetting.freed(name, log.high)
                    if folded is not None and self._start is not None:
                        self._start = max(self._start, folded)
                due = forgetting.next_due()
                if forgetting.emptied:
                    continue
                if due is None:
                    return
                self._sweep_wake = wake = asyncio.Event()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, due - loop.time())):
                        await wake.wait()
        except StoreUnavailable:
            pass  # asked again at the next delete: a log held too long costs memory, never a change
        finally:
            self._sweeper = None
