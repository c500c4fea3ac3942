"""Waiting for one key (a rank's or a named record's alike), and for a set of ranks, and how the feed wakes
them: what a get parks on (:class:`KeyWaits`, one per registry).

A getter that finds nothing (or only a record older than its ``after``) joins the key's
*waitlist* (``waitlist``): an ``asyncio.Event``, a count of its waiters, and the newest record
the feed delivered for the key. A change for the key stores its record there (the store hands it
over when it has it; otherwise it is read once, for all the key's waiters), sets the event, and
puts a fresh event in its place for later waiters; an event that others share is never
``clear()``-ed. A woken waiter takes the delivered record if it is new enough, or waits on the
next event. An ``after`` counts in the store's incarnation: in a new one (the store lost its
data, so versions start again) every record is new enough. The waitlist exists only while
someone waits: the last waiter to leave (answered, timed out or cancelled) removes it, so probing
keys that never register leaves nothing behind.

Parking is ordered so that no change can slip past: a waiter joins the
waitlist and takes the current event *before* it reads the store. A change
landing during the read sets that event, so the wait that follows returns at
once. A read that fails (the store is unreachable) is not an answer: the
waiter parks anyway, and the key (as any whose read after a change failed)
is read again, pausing longer each time, until a read works or nobody waits
for it: a feed that works while the calls fail brings no resync. At
the deadline the waiter reads the store once more: ``None`` only when the
store proves the record absent; when it cannot,
:class:`~aiobootstrap.exceptions.StoreUnavailable` reaches the caller.

A set-wait (a batch get) names its ranks as a :class:`~._ranks.RankSet`,
ranges never expanded. It reads what exists of the set (``Store.records_in``),
then waits for the missing ranks one at a time, in rank order, reading them a
chunk at a time as it goes: it holds the missing ranges, the records found,
and one waitlist, whatever the size of the set. When the last has arrived it
reads the whole set again, since a rank unregistered meanwhile is missing
again.

``deliveries`` (the registry's) hears each record delivered to a key's waiters,
just before they are woken, and ``None`` for a key deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from ..._ranks import RankSet
from ...exceptions import ShuttingDown, StoreUnavailable
from ...store import Change, Key, Record, Store
from ..parking import Parked, Parking
from ..subscribers import DeliveryListener, Subscribers
from .waitlist import Waitlist, fresh, not_found

__all__ = ["KeyWaits"]

_SWEEP_CHUNK = 256
"""How many missing ranks a parked set-wait reads at once while it walks them in order."""
_RETRY_FIRST, _RETRY_MOST = 0.05, 1.0
"""Seconds before keys whose read failed are read again: doubling from the first to the most."""


class KeyWaits:
    """The waits for one key and for a set of ranks of one registry, and the feed's records for them."""

    def __init__(self, store: Store, parking: Parking, deliveries: Subscribers[DeliveryListener]) -> None:
        self.store = store
        self.parking = parking
        self.deliveries = deliveries
        self.waitlists: dict[Key, Waitlist] = {}
        """The keys someone waits for now, each with its waiters' shared state."""
        self._to_read: set[Key] = set()
        self._reader: asyncio.Task[None] | None = None
        self._closed = False

    async def wait(self, key: Key, timeout: float, after: int = 0) -> Record | None:
        """``key``'s record newer than ``after``, waiting up to ``timeout`` seconds.

        Returns ``None`` when the time runs out first and the store shows no such record.
        """
        if timeout <= 0:
            return fresh(await self.store.get(key), after)
        incarnation = self.store.incarnation
        with contextlib.suppress(StoreUnavailable):  # an unreachable store only delays the answer
            if (record := fresh(await self.store.get(key), after)) is not None:
                return record
        parked = self._park(key.namespace, key.kind, key.role, key.rank if key.name is None else key.name)
        try:
            async with asyncio.timeout(timeout):
                return await self._arrival(key, after, incarnation)
        except TimeoutError:
            pass
        finally:
            self.parking.unpark(parked)
        # The deadline: an answer only what the store can prove.
        return fresh(await self.store.get(key), self._counted(after, incarnation))

    async def wait_all(
        self, namespace: str, kind: str, role: str, ranks: RankSet, timeout: float, after: int = 0
    ) -> tuple[list[Record], RankSet]:
        """The records of ``ranks`` (one kind and role) newer than ``after``, waiting up to ``timeout`` seconds.

        Returns the records found, by rank, and the ranks still missing when
        the time ran out (empty when all arrived). What a wait holds grows with
        the records found, not with the set: the set stays ranges, and only
        the rank being waited for has a waitlist.
        """
        incarnation = self.store.incarnation
        found = await self._read_set(namespace, kind, role, ranks, after, tolerate_outage=timeout > 0)
        missing = not_found(ranks, found)
        if missing and timeout > 0:
            parked = self._park(namespace, kind, role, missing)
            try:
                async with asyncio.timeout(timeout):
                    # Waiting for each missing rank in turn ends when the last
                    # arrives, and holds one waitlist at a time, not one per rank.
                    # A rank unregistered meanwhile is missing again: go round.
                    while missing:
                        await self._sweep(namespace, kind, role, missing, after, incarnation, found)
                        found = await self._read_set(
                            namespace,
                            kind,
                            role,
                            ranks,
                            self._counted(after, incarnation),
                            tolerate_outage=True,
                        )
                        missing = parked.ranks = not_found(ranks, found)
            except TimeoutError:
                after = self._counted(after, incarnation)
                found = await self._read_set(namespace, kind, role, ranks, after, tolerate_outage=False)
                missing = not_found(ranks, found)
            finally:
                self.parking.unpark(parked)
        return [found[rank] for rank in sorted(found)], missing

    async def _sweep(
        self,
        namespace: str,
        kind: str,
        role: str,
        missing: RankSet,
        after: int,
        incarnation: str,
        found: dict[int, Record],
    ) -> None:
        """Wait, rank by rank in ascending order, until each of ``missing`` has arrived, into ``found``.

        A chunk of ranks is read at once before its ranks are waited for, so
        ranks already there cost one read per chunk, not one each; keys are
        made for the chunk at hand only.
        """
        for chunk in missing.chunks(_SWEEP_CHUNK):
            counted = self._counted(after, incarnation)
            arrived = await self._read_set(namespace, kind, role, chunk, counted, tolerate_outage=True)
            found.update(arrived)
            for rank in chunk.without(arrived):
                found[rank] = await self._arrival(Key(namespace, kind, role, rank), after, incarnation)
            # A memory store answers without yielding: let the loop breathe between chunks.
            await asyncio.sleep(0)

    async def _read_set(
        self, namespace: str, kind: str, role: str, ranks: RankSet, after: int, *, tolerate_outage: bool
    ) -> dict[int, Record]:
        """The records of ``ranks`` newer than ``after``, by rank, read at a cost that grows with
        what exists (:meth:`Store.records_in`)."""
        try:
            records = await self.store.records_in(namespace, kind, role, ranks)
        except StoreUnavailable:
            if tolerate_outage:
                return {}
            raise
        return {record.rank: record for record in records if record.version > after}

    def _park(self, namespace: str, kind: str, role: str, ranks: int | str | RankSet) -> Parked:
        """Count a parked wait, or refuse it (closed, or the limit is reached)."""
        if self._closed:
            raise ShuttingDown()
        return self.parking.park(namespace, kind, role, ranks)

    def _counted(self, after: int, incarnation: str) -> int:
        """``after``, a version of ``incarnation``: 0 in another, where versions started again (see the top)."""
        return after if self.store.incarnation == incarnation else 0

    async def _arrival(self, key: Key, after: int, incarnation: str) -> Record:
        """Wait, with no time limit, until ``key`` has a record newer than ``after`` (of ``incarnation``)."""
        waitlist = self.waitlists.get(key)
        if waitlist is None:
            waitlist = self.waitlists[key] = Waitlist()
        waitlist.waiters += 1
        try:
            # Take the event before reading: a change landing during the read sets it.
            event = waitlist.event
            try:
                record = fresh(await self.store.get(key), self._counted(after, incarnation))
            except StoreUnavailable:  # not an answer: read again until a read works or we leave
                record = None
                self._read_later(key)
            while record is None:
                if self._closed:
                    raise ShuttingDown()
                await event.wait()
                event = waitlist.event
                record = fresh(waitlist.record, self._counted(after, incarnation))
            return record
        finally:
            waitlist.waiters -= 1
            if waitlist.waiters == 0 and self.waitlists.get(key) is waitlist:
                del self.waitlists[key]

    # -- the feed ---------------------------------------------------------------

    def oldest(self) -> dict[tuple[str, str, str], float]:
        """Per (namespace, kind, role) with waits parked: the seconds the longest-waited key has waited."""
        now = time.monotonic()
        oldest: dict[tuple[str, str, str], float] = {}
        for key, waitlist in self.waitlists.items():
            where = (key.namespace, key.kind, key.role)
            oldest[where] = max(oldest.get(where, 0.0), now - waitlist.since)
        return oldest

    def changed(self, change: Change) -> None:
        """The store applied ``change``: hand its record to the key's waiters (read once if not carried)."""
        if change.deleted:
            self._tell(change.key, None)
            return
        waitlists = self.waitlists
        if not waitlists:
            return  # nobody waits (a write's common case): the key is not even hashed
        waitlist = waitlists.get(change.key)
        if waitlist is None:
            return
        if change.record is not None:
            self._deliver(waitlist, change.record)
        else:
            self._read_later(change.key)

    def resync(self) -> None:
        """The feed may have missed changes: read every parked key again."""
        for key in self.waitlists:
            self._read_later(key)

    def close(self) -> None:
        """Wake every waiter (each raises :class:`ShuttingDown`)."""
        self._closed = True
        for waitlist in self.waitlists.values():
            waitlist.event.set()
        if self._reader is not None:
            self._reader.cancel()

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
                keys = [key for key in self._to_read if key in self.waitlists]
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
                    waitlist = self.waitlists.get(key)
                    if waitlist is not None and record is not None:
                        self._deliver(waitlist, record)
        finally:
            self._reader = None
