"""Waiting for more than one record: a set of keys, a condition over a namespace's kind, and a plain
subscription to a kind's changes, each told the changes that concern it by lookup.

Theory of operation
-------------------
The registry hears every change on the store's feed (``Registry.changed``). A
one-key wait and the sweep of a rank set sit in the key's waitlist
(``waitlist``). Everything else that listens sits here, grouped by what it
watches, as etcd keeps its watcher groups: a change finds its listeners with
two dict lookups, by its key and by its (namespace, kind), never by walking
every listener.

- **A set of keys** (:meth:`Watchers.wait_keys`: names, such as a decode's
  bootstrap rooms): read once; the keys still missing are indexed by key, each
  arrival strikes one off, and when none is left the set is read once more
  (a key deleted meanwhile is missing again: wait on). A wait costs three reads
  however many keys arrive.
- **A condition** (``conditions``, :meth:`Watchers.wait_until`): a predicate
  over the records of one (namespace, kind, role), with no I/O of its own. It is
  *seeded* once from the records (one read) and told each change of its kind
  as it lands, so it answers at any moment from what it holds: a count of
  distinct records (``AtLeast``) costs one read, not a read per arrival.
  Waiters of equal conditions (``Condition.identity``) share one: one seed,
  one state, one event. Changes arriving while the seed is read are kept and told
  after it, so none slips past (a change told twice is harmless: a condition
  keeps each key's latest state).
- **A subscription** (:meth:`Watchers.subscribe`): an in-process listener told
  every change of a (namespace, kind) as it lands, and told to read again when
  the feed may have missed some. No wait is parked to hear them.

A waiter that leaves (answered, timed out, cancelled) takes its entries with
it: the last waiter of a condition or a key drops the group, so a probe of
keys that never come leaves nothing behind. Running out of time is an answer,
never an exception; ``CancelledError`` always propagates. When the feed may
have missed changes (:meth:`Watchers.resync`), conditions are seeded again and
set waits read again. :meth:`Watchers.close` wakes every waiter with
:class:`~aiobootstrap.exceptions.ShuttingDown`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Sequence

from ...exceptions import ShuttingDown, StoreUnavailable
from ...store import Change, ChangeListener, Key, Record, Store
from ..parking import Parked, Parking
from .conditions import Condition

__all__ = ["Watchers"]

log = logging.getLogger("aiobootstrap")

_RETRY_FIRST, _RETRY_MOST = 0.05, 1.0
"""Seconds before a failed seed is read again: doubling from the first to the most."""


class _Shared:
    """One condition and its waiters: the event they wait on (replaced once set), how many, its seed."""

    __slots__ = ("arrived", "condition", "event", "lock", "resyncs", "seeded", "since", "waiters")

    def __init__(self, condition: Condition) -> None:
        self.condition = condition
        self.since = time.monotonic()
        """When its first waiter came (the condition has had someone waiting since)."""
        self.event = asyncio.Event()
        self.waiters = 0
        self.seeded = False
        self.arrived: list[Change] | None = None
        """The changes that arrived while the seed is read (``None``: no seed being read)."""
        self.lock = asyncio.Lock()
        self.resyncs = 0
        """How many times the feed said it may have missed changes: a seed read across one is read again."""

    def changed(self, change: Change) -> None:
        condition = self.condition
        if change.key.role != condition.role:
            return
        if self.arrived is not None:
            self.arrived.append(change)
        elif self.seeded:
            condition.changed(change)
            if condition.met:
                self._wake()

    def resync(self) -> None:
        """The feed may have missed changes: seeded again by the next waiter to wake."""
        self.seeded = False
        self.resyncs += 1
        self._wake()

    def _wake(self) -> None:
        self.event.set()
        self.event = asyncio.Event()


class _KeySet:
    """A set wait's keys still missing; its event is set when the last arrives (or to read again)."""

    __slots__ = ("event", "missing", "since")

    def __init__(self, missing: set[Key], since: float) -> None:
        self.missing = missing
        self.event = asyncio.Event()
        self.since = since
        """When the set wait began."""

    def changed(self, change: Change) -> None:
        if not change.deleted:
            self.missing.discard(change.key)
            if not self.missing:
                self.event.set()

    def resync(self) -> None:
        self.event.set()


class _Subscription:
    """A listener told each change of its (namespace, kind)."""

    __slots__ = ("listener",)

    def __init__(self, listener: ChangeListener) -> None:
        self.listener = listener

    def changed(self, change: Change) -> None:
        try:
            self.listener.changed((change,))
        except Exception:
            log.exception("A subscriber to a kind's changes failed")

    def resync(self) -> None:
        try:
            self.listener.resync()
        except Exception:
            log.exception("A subscriber to a kind's changes failed to read again")


_Kind = tuple[str, str]
"""A namespace and a kind: what a condition or a subscription watches."""


class Watchers:
    """The set waits, conditions and subscriptions of one registry, by what they watch (see the top)."""

    def __init__(self, store: Store, parking: Parking) -> None:
        self._store = store
        self._parking = parking
        self._by_key: dict[Key, dict[_KeySet, None]] = {}
        self._by_kind: dict[_Kind, dict[_Shared | _Subscription, None]] = {}
        self._conditions: dict[Hashable, _Shared] = {}
        self._closed = False

    # -- what the registry tells ------------------------------------------

    def changed(self, change: Change) -> None:
        """Tell ``change`` to whoever watches its key or its kind (two lookups)."""
        key = change.key
        if self._by_key and (sets := self._by_key.get(key)) is not None:
            for keys in tuple(sets):
                keys.changed(change)
        if self._by_kind and (group := self._by_kind.get((key.namespace, key.kind))) is not None:
            for watch in tuple(group):
                watch.changed(change)

    def resync(self) -> None:
        """The feed may have missed changes: conditions are seeded again, set waits read again."""
        for sets in tuple(self._by_key.values()):
            for keys in tuple(sets):
                keys.resync()
        for group in tuple(self._by_kind.values()):
            for watch in tuple(group):
                watch.resync()

    def close(self) -> None:
        """Wake every waiter (each raises :class:`ShuttingDown`); subscriptions simply hear no more."""
        self._closed = True
        for sets in self._by_key.values():
            for keys in sets:
                keys.event.set()
        for shared in self._conditions.values():
            shared.event.set()

    @property
    def keys(self) -> int:
        """How many keys a set wait waits for right now."""
        return len(self._by_key)

    @property
    def kinds(self) -> int:
        """How many (namespace, kind)s a condition or a subscription watches right now."""
        return len(self._by_kind)

    def oldest(self, oldest: dict[tuple[str, str, str], float]) -> None:
        """Into ``oldest``, per (namespace, kind, role): the seconds the longest set wait or condition has
        waited, where longer than what it holds (a walk of the waits, for a scrape)."""
        now = time.monotonic()
        for key, sets in self._by_key.items():
            where = (key.namespace, key.kind, key.role)
            for keys in sets:
                oldest[where] = max(oldest.get(where, 0.0), now - keys.since)
        for shared in self._conditions.values():
            condition = shared.condition
            where = (condition.namespace, condition.kind, condition.role)
            oldest[where] = max(oldest.get(where, 0.0), now - shared.since)

    # -- a subscription ----------------------------------------------------

    def subscribe(self, namespace: str, kind: str, listener: ChangeListener) -> Callable[[], None]:
        """Tell ``listener`` each change of ``kind`` in ``namespace`` as it lands (``changed``, one change at a
        time, its record when the feed carried it), and ``resync`` when some may have been missed; call what
        this returns to stop. A listener must not block; what it raises is logged."""
        subscription = _Subscription(listener)
        self._index(namespace, kind, subscription)

        def unsubscribe() -> None:
            self._unindex(namespace, kind, subscription)

        return unsubscribe

    # -- a set of keys -------------------------------------------------------

    async def wait_keys(self, keys: Sequence[Key], timeout: float) -> list[Record | None]:
        """The records of ``keys``, in order (``None``: missing), once all exist or at ``timeout`` seconds."""
        records = await self._store.get_many(keys)
        if timeout <= 0 or None not in records:
            return records
        first, since = keys[0], time.monotonic()
        parked = self._park(first.namespace, first.kind, first.role)
        try:
            async with asyncio.timeout(timeout):
                while None in records:
                    await self._arrivals(
                        since, {key for key, record in zip(keys, records, strict=True) if record is None}
                    )
                    records = await self._store.get_many(keys)
        except TimeoutError:
            records = await self._store.get_many(keys)
        finally:
            self._parking.unpark(parked)
        return records

    async def _arrivals(self, since: float, missing: set[Key]) -> None:
        """Return once every key of ``missing`` has had a record since this began (or the feed resynced)."""
        wanted = list(missing)
        waiting = _KeySet(set(wanted), since)
        for key in wanted:
            self._by_key.setdefault(key, {})[waiting] = None
        try:
            # Indexed before this read: a record landing during it strikes its key off all the same.
            for key, record in zip(wanted, await self._store.get_many(wanted), strict=True):
                if record is not None:
                    waiting.missing.discard(key)
            if waiting.missing and not waiting.event.is_set():
                await waiting.event.wait()
            if self._closed:
                raise ShuttingDown()
        finally:
            for key in wanted:
                sets = self._by_key.get(key)
                if sets is not None:
                    sets.pop(waiting, None)
                    if not sets:
                        del self._by_key[key]

    # -- a condition ---------------------------------------------------------

    async def wait_until(self, condition: Condition, timeout: float) -> bool:
        """Whether ``condition`` holds, waiting up to ``timeout`` seconds for it (one read to seed it, shared
        with every waiter of an equal condition; then each change told as it lands)."""
        if timeout <= 0:
            condition.seed(await self._store.records(condition.namespace, condition.kind, condition.role))
            return condition.met
        if self._closed:
            raise ShuttingDown()
        shared = self._conditions.get(condition.identity)
        if shared is None:
            shared = self._conditions[condition.identity] = _Shared(condition)
            self._index(condition.namespace, condition.kind, shared)
        shared.waiters += 1
        parked: Parked | None = None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    if self._closed:
                        raise ShuttingDown()
                    if not shared.seeded:
                        await self._seed(shared)
                    if shared.condition.met:
                        return True
                    if parked is None:
                        parked = self._park(condition.namespace, condition.kind, condition.role)
                    await shared.event.wait()
        except TimeoutError:
            # Not seeded yet (the time ran out during the read): not known to hold; the caller reads.
            return shared.seeded and shared.condition.met
        finally:
            if parked is not None:
                self._parking.unpark(parked)
            shared.waiters -= 1
            if shared.waiters == 0:
                del self._conditions[condition.identity]
                self._unindex(condition.namespace, condition.kind, shared)

    async def _seed(self, shared: _Shared) -> None:
        """Seed ``shared``'s condition from the records (one waiter reads; the others wait for it)."""
        async with shared.lock:
            pause = _RETRY_FIRST
            condition = shared.condition
            while not shared.seeded:
                if self._closed:  # close() answers every waiter, also one reading again and again
                    raise ShuttingDown()
                shared.arrived, resyncs = [], shared.resyncs
                try:
                    records = await self._store.records(condition.namespace, condition.kind, condition.role)
                except StoreUnavailable:  # not an answer: read again until it works or the wait runs out
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, _RETRY_MOST)
                    continue
                finally:
                    arrived, shared.arrived = shared.arrived, None
                if shared.resyncs != resyncs:
                    continue  # the feed may have missed changes during the read: read again
                condition.seed(records)
                for change in arrived:
                    condition.changed(change)
                shared.seeded = True

    # -- the groups ----------------------------------------------------------

    def _index(self, namespace: str, kind: str, watch: _Shared | _Subscription) -> None:
        self._by_kind.setdefault((namespace, kind), {})[watch] = None

    def _unindex(self, namespace: str, kind: str, watch: _Shared | _Subscription) -> None:
        group = self._by_kind.get((namespace, kind))
        if group is not None:
            group.pop(watch, None)
            if not group:
                del self._by_kind[(namespace, kind)]

    def _park(self, namespace: str, kind: str, role: str) -> Parked:
        """Count a parked wait (on no rank), or refuse it: closed, or the limit is reached."""
        if self._closed:
            raise ShuttingDown()
        return self._parking.park(namespace, kind, role, "")
