"""The registry: waiting for records, woken by the store's change feed.

Theory of operation
-------------------
The store owns the records, their versions and the limits (see
``store/interface.py``); the registry owns the waiting. Every change the store
applies, made through this process or any other sharing the store, reaches
:meth:`Registry.changed`, and only that wakes waiters: a local registration
wakes nobody directly, so the path is the same on one process and on many.

A getter that finds nothing (or only a record older than its ``after``) joins the key's
*waitlist*: an ``asyncio.Event``, a count of its waiters, and the newest record the feed
delivered for the key. A change for the key stores its record there (the store hands it over
when it has it; otherwise the registry reads it once, for all the key's waiters), sets the
event, and puts a fresh event in its place for later waiters; an event that others share is
never ``clear()``-ed. A woken waiter takes the delivered record if it is new enough, or waits
on the next event. An ``after`` counts in the store's incarnation: in a new one (the store
lost its data, so versions start again) every record is new enough.

How a wait parks so that no change slips past, and how a set-wait walks its
missing ranks, is told in ``waits``. Everything else that waits or listens is
in ``watchers``, grouped by what it watches (etcd's watcher groups): a set of
keys (:meth:`Registry.wait_keys`), a condition over a namespace's kind, seeded
by one read and told each change as it lands (:meth:`Registry.wait_until`),
and a plain subscription to a kind's changes (:meth:`Registry.subscribe`). A
change finds each of them by lookup, by key or by (namespace, kind); no face
parks a wait of its own to hear changes. The registry is also the *door*: the
only way the server reaches the records, their versions and the leases, each
change refused once it is closed (``doors``).

The waitlist exists only while someone waits: the last waiter to leave
(answered, timed out or cancelled) removes it, so probing keys that never
register leaves nothing behind. Running out of time is a normal answer
(``None``, or the keys still missing), not an exception. ``close()`` wakes
every waiter with :class:`~aiobootstrap.exceptions.ShuttingDown`. The
registry also knows the task of each parked wait (``parked_tasks``): a server
that stops can answer those requests itself, one write each, and cancel their
tasks, which is much cheaper than waking thousands of handlers to build a
``503`` each (``server/app.py``, ``release_waiters``).

``deliveries`` shows a host what the feed brings (``core/subscribers``):
each record delivered to a key's waiters, published just before they are
woken (what a subscriber schedules with ``call_soon`` runs after the step
that made the change and before any of them resumes), and ``None`` for a key
deleted. A subscriber must not block; what it raises is logged. The server's
pre-built gets (``server/fastpath/gets.py``) subscribe to it.

This module is pure asyncio: it knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from ...exceptions import StoreUnavailable
from ...store import Change, ChangeListener, Key, Record, Store
from ..parking import Parking
from ..subscribers import DeliveryListener, Subscribers
from .doors import Door
from .waitlist import Waitlist
from .waits import Waits
from .watchers import AtLeast, Condition, Watchers

__all__ = ["AtLeast", "Condition", "Registry"]

log = logging.getLogger("aiobootstrap")

_RETRY_FIRST, _RETRY_MOST = 0.05, 1.0
"""Seconds before keys whose read failed are read again: doubling from the first to the most."""


class Registry(Door, Waits):
    """The records of a store, and the requests waiting for them.

    Hand it to :meth:`Store.open` as the listener: its feed is what wakes waiters. Its reads and
    changes are the door's (``doors``), its waits ``waits``'s; what follows is how the feed wakes them.
    """

    def __init__(self, store: Store, *, max_waiters: int | None = None) -> None:
        """``max_waiters`` limits the parked waits (:class:`TooManyWaiters` past it)."""
        self.store = store
        self.deliveries: Subscribers[DeliveryListener] = Subscribers("the registry's deliveries")
        """Hears each record delivered to waiters and each key deleted (see the module's notes)."""
        self._waitlists: dict[Key, Waitlist] = {}
        self.parking = Parking(max_waiters)
        """Who is parked, by namespace and rank (``/ranks``); the watch history counts its watchers here too."""
        self._watchers = Watchers(store, self.parking)
        """The set waits, conditions and subscriptions, by what they watch (``watchers``)."""
        self._to_read: set[Key] = set()
        self._reader: asyncio.Task[None] | None = None
        self._closed = False

    # -- reading -------------------------------------------------------

    @property
    def parked(self) -> int:
        """How many waits are parked right now."""
        return self.parking.count

    @property
    def parked_tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks of the waits parked right now, in the order they parked (a task parks one wait at a time)."""
        return self.parking.tasks

    def parked_in(self, namespace: str) -> int:
        """How many waits are parked right now in ``namespace``."""
        return self.parking.in_namespace(namespace)

    def parked_namespaces(self) -> list[str]:
        """The namespaces with parked waits."""
        return self.parking.namespaces()

    @property
    def waiting_keys(self) -> int:
        """How many keys a wait waits for right now (a waitlist, or a set wait's missing key)."""
        return len(self._waitlists) + self._watchers.keys

    @property
    def watched_kinds(self) -> int:
        """How many (namespace, kind)s a condition or a subscription watches right now."""
        return self._watchers.kinds

    def oldest_waits(self) -> dict[tuple[str, str, str], float]:
        """Per (namespace, kind, role) with waits parked: the seconds the longest-waited key has waited."""
        now = time.monotonic()
        oldest: dict[tuple[str, str, str], float] = {}
        for key, waitlist in self._waitlists.items():
            where = (key.namespace, key.kind, key.role)
            oldest[where] = max(oldest.get(where, 0.0), now - waitlist.since)
        return oldest

    # -- waiting for more than one key, and following a kind ------------

    def wait_keys(self, keys: Sequence[Key], timeout: float) -> Coroutine[Any, Any, list[Record | None]]:
        """The records of ``keys`` (named ones, say), in order (``None``: missing), once all exist or at
        ``timeout`` seconds: three reads, however many keys arrive meanwhile (``watchers``)."""
        return self._watchers.wait_keys(keys, timeout)

    def wait_until(self, condition: Condition, timeout: float) -> Coroutine[Any, Any, bool]:
        """Whether ``condition`` holds, waiting up to ``timeout`` seconds: seeded by one read (shared by the
        waiters of an equal condition), then told each change of its kind as it lands (``watchers``)."""
        return self._watchers.wait_until(condition, timeout)

    def subscribe(self, namespace: str, kind: str, listener: ChangeListener) -> Callable[[], None]:
        """Tell ``listener`` every change of ``kind`` in ``namespace`` as it lands, parking no wait; call what
        this returns to stop (``watchers``)."""
        return self._watchers.subscribe(namespace, kind, listener)

    # -- closing -------------------------------------------------------

    def close(self) -> None:
        """Answer every parked wait with :class:`ShuttingDown`; refuse new changes and new waits.

        A wait whose task was cancelled meanwhile (see :attr:`parked_tasks`) ends cancelled. The store
        stays open: whoever opened it closes it. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        self.parking.close()
        self._watchers.close()
        for waitlist in self._waitlists.values():
            waitlist.event.set()
        if self._reader is not None:
            self._reader.cancel()

    # -- the change feed -----------------------------------------------

    def changed(self, changes: Sequence[Change]) -> None:
        """The store applied ``changes``: wake the waiters of their keys, and tell whoever watches more."""
        watchers = self._watchers
        for change in changes:
            watchers.changed(change)
            if change.deleted:
                self._tell(change.key, None)
                continue
            waitlist = self._waitlists.get(change.key)
            if waitlist is None:
                continue
            if change.record is not None:
                self._deliver(waitlist, change.record)
            else:
                self._read_later(change.key)

    def resync(self) -> None:
        """The feed may have missed changes: read every parked key again, seed every condition again."""
        self._watchers.resync()
        for key in self._waitlists:
            self._read_later(key)

    def _deliver(self, waitlist: Waitlist, record: Record) -> None:
        held, now = waitlist.record, self.store.incarnation
        if held is None or held.version < record.version or waitlist.incarnation != now:
            waitlist.record, waitlist.incarnation = record, now  # a version counts in its incarnation
        self._tell(record.key, record)
        waitlist.event.set()
        waitlist.event = asyncio.Event()

    def _tell(self, key: Key, record: Record | None) -> None:
        for listener in self.deliveries:
            try:
                listener.delivered(key, record)
            except Exception:
                self.deliveries.failed()  # logged: the waiters wake all the same

    def _read_later(self, key: Key) -> None:
        # Changes from another process carry only their key: one read per key
        # serves all its waiters, and one task reads every key asked for meanwhile.
        self._to_read.add(key)
        if self._reader is None and not self._closed:
            self._reader = asyncio.get_running_loop().create_task(self._read_keys())

    async def _read_keys(self) -> None:
        pause = _RETRY_FIRST
        try:
            while self._to_read:
                keys = [key for key in self._to_read if key in self._waitlists]
                self._to_read.clear()
                if not keys:
                    continue
                try:
                    records = await self.store.get_many(keys)
                except StoreUnavailable:  # not dropped: no resync() may come (see the notes)
                    self._to_read.update(keys)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, _RETRY_MOST)
                    continue
                pause = _RETRY_FIRST
                for key, record in zip(keys, records, strict=True):
                    waitlist = self._waitlists.get(key)
                    if waitlist is not None and record is not None:
                        self._deliver(waitlist, record)
        finally:
            self._reader = None
