"""Waiting for one key (a rank's or a named record's alike), and for a set of ranks: what a get parks on.

Parking is ordered so that no change can slip past: a waiter joins the
waitlist and takes the current event *before* it reads the store. A change
landing during the read sets that event, so the wait that follows returns at
once. A read that fails (the store is unreachable) is not an answer: the
waiter parks anyway, and the key (as any whose read after a change failed)
is read again, pausing longer each time, until a read works or nobody waits
for it: a feed that works while the calls fail brings no :meth:`resync`. At
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
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from ..._ranks import RankSet
from ...exceptions import ShuttingDown, StoreUnavailable
from ...store import Key, Record, Store
from ..parking import Parked, Parking
from .waitlist import Waitlist, fresh, not_found

__all__ = ["Waits"]

_SWEEP_CHUNK = 256
"""How many missing ranks a parked set-wait reads at once while it walks them in order."""


class Waits:
    """The registry's waits (a part of :class:`~aiobootstrap.core.registry.Registry`, which sets what follows)."""

    store: Store
    parking: Parking
    _waitlists: dict[Key, Waitlist]
    _closed: bool
    _read_later: Callable[[Key], None]
    """The registry's: read ``key`` again for its waiters (a read after a change failed)."""

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
        waitlist = self._waitlists.get(key)
        if waitlist is None:
            waitlist = self._waitlists[key] = Waitlist()
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
            if waitlist.waiters == 0 and self._waitlists.get(key) is waitlist:
                del self._waitlists[key]
