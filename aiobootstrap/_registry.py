"""The registry: every rank's transfer-engine info, and the waiting for it.

Theory of operation
-------------------
A registration stores a :class:`Record` under its rank and stamps it with a
server-wide ``version`` that grows by one with every change, like an etcd
revision. The record's wire reply is encoded once, here, so that a thousand
waiters woken by one registration share one ``bytes`` object.

A getter that finds nothing (or only a record older than its ``after``) joins
the rank's *waitlist*: an ``asyncio.Event`` plus a count of its waiters. A
registration sets that event, which wakes every waiter of the rank in one
step, and puts a fresh event in its place for later waiters; an event that
others share is never ``clear()``-ed, so no waiter can miss a wake-up. A
woken waiter checks the store again and either returns or waits on the new
event. The waitlist exists only while someone waits: the last waiter to leave
(answered, timed out or cancelled) removes it, so probing ranks that never
register leaves nothing behind.

A wait for a set of ranks walks the ranks still missing one at a time: since
all of them must arrive, waiting for each in turn ends when the last arrives,
and costs one waitlist at a time instead of one per rank.

Running out of time is a normal answer (``None`` or the missing ranks), not an
exception. ``close()`` wakes every waiter with :class:`ShuttingDown`.

Where records live is behind :class:`RecordStore`, the one seam a durable
journal or an external store replaces without touching the waiting.

This module is pure asyncio: it knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from .exceptions import ShuttingDown, TooManyRanks, TooManyWaiters

__all__ = ["MemoryStore", "ParkingLot", "Record", "RecordStore", "Registry"]


@dataclass(frozen=True, slots=True)
class Record:
    """One rank's registered transfer-engine info."""

    rank: int
    session_id: str
    weights_info_dict: dict[str, Any]
    version: int
    registered_at: float
    """Wall-clock time of the registration (``time.time()``)."""
    reply: bytes = b""
    """The encoded reply to a get of this rank, built once at registration."""
    registered_monotonic: float = dataclasses.field(default=0.0, compare=False)
    """``time.monotonic()`` at the registration, for measuring how fast waiters wake."""


class RecordStore(Protocol):
    """Where the registry keeps its records."""

    @property
    def last_version(self) -> int:
        """The highest version ever written, so versions go on growing."""
        ...

    def get(self, rank: int) -> Record | None: ...

    def __iter__(self) -> Iterator[Record]: ...

    def __len__(self) -> int: ...

    async def put(self, record: Record) -> None:
        """Store ``record``; when this returns, the record is as safe as the store makes it."""
        ...

    async def delete(self, rank: int, version: int) -> Record | None:
        """Forget ``rank`` as of ``version``; return what was stored."""
        ...

    async def close(self) -> None: ...


class MemoryStore:
    """Records in a dict: fast, and gone when the process ends."""

    def __init__(self, records: Iterable[Record] = (), last_version: int = 0) -> None:
        self._records: dict[int, Record] = {}
        self._last_version = last_version
        for record in records:
            self._keep(record)

    @property
    def last_version(self) -> int:
        return self._last_version

    def get(self, rank: int) -> Record | None:
        return self._records.get(rank)

    def __iter__(self) -> Iterator[Record]:
        return iter(list(self._records.values()))

    def __len__(self) -> int:
        return len(self._records)

    async def put(self, record: Record) -> None:
        self._keep(record)

    async def delete(self, rank: int, version: int) -> Record | None:
        self._last_version = max(self._last_version, version)
        return self._records.pop(rank, None)

    async def close(self) -> None:
        pass

    def _keep(self, record: Record) -> None:
        self._last_version = max(self._last_version, record.version)
        current = self._records.get(record.rank)
        # Puts of one rank may finish out of order in a slower store; the
        # higher version is the later registration and must win.
        if current is None or current.version < record.version:
            self._records[record.rank] = record


class _Waitlist:
    __slots__ = ("event", "waiters")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.waiters = 0


class ParkingLot:
    """A count of parked waits and its limit, shared by registries that share a server."""

    __slots__ = ("limit", "parked")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.parked = 0


def _no_reply(record: Record) -> bytes:
    return b""


class Registry:
    """Ranks' records and the requests waiting for them."""

    def __init__(
        self,
        store: RecordStore | None = None,
        *,
        encode_reply: Callable[[Record], bytes] = _no_reply,
        max_waiters: int | None = None,
        lot: ParkingLot | None = None,
        max_ranks: int | None = None,
    ) -> None:
        """``max_waiters`` limits this registry's parked waits, unless a shared ``lot`` is given;
        ``max_ranks`` limits how many distinct ranks it stores (:class:`TooManyRanks` past it)."""
        self._store: RecordStore = store if store is not None else MemoryStore()
        self._encode_reply = encode_reply
        self._version = self._store.last_version
        self._waitlists: dict[int, _Waitlist] = {}
        self._parked = 0
        self._writing = 0
        self._lot = lot if lot is not None else ParkingLot(max_waiters)
        self._max_ranks = max_ranks
        self._closed = False

    # -- reading -------------------------------------------------------

    @property
    def version(self) -> int:
        """The version of the latest change readers can see (0 before the first).

        A change still being made durable is not counted: a reply quoting its
        version could outlive a crash that loses it, and the version be reused.
        """
        return self._store.last_version

    @property
    def parked(self) -> int:
        """How many waits are parked right now."""
        return self._parked

    @property
    def writing(self) -> int:
        """How many registrations are on their way into the store (a durable one syncs first)."""
        return self._writing

    @property
    def waiting_ranks(self) -> int:
        """How many ranks have a waitlist right now."""
        return len(self._waitlists)

    @property
    def closed(self) -> bool:
        return self._closed

    def get(self, rank: int) -> Record | None:
        return self._store.get(rank)

    def records(self) -> list[Record]:
        """Every stored record, by rank."""
        return sorted(self._store, key=lambda record: record.rank)

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, rank: object) -> bool:
        return isinstance(rank, int) and self._store.get(rank) is not None

    # -- changing ------------------------------------------------------

    async def register(self, rank: int, session_id: str, weights_info_dict: dict[str, Any]) -> Record:
        """Store a rank's info under a new version and wake its waiters."""
        if self._closed:
            raise ShuttingDown("The server is shutting down.")
        self._check_room(rank)
        self._version += 1
        record = Record(
            rank,
            session_id,
            weights_info_dict,
            self._version,
            time.time(),
            registered_monotonic=time.monotonic(),
        )
        record = dataclasses.replace(record, reply=self._encode_reply(record))
        # A durable store's put takes a while, and a client that hangs up then
        # cancels us; the record still lands, so its waiters must still wake.
        self._writing += 1
        stored = asyncio.ensure_future(self._put(record))
        try:
            await asyncio.shield(stored)
        except asyncio.CancelledError:
            stored.add_done_callback(partial(self._wake_if_stored, record.rank))
            raise
        # Woken here, not in the shielded task: waking schedules every waiter,
        # and they run when this task next yields, which is after the caller
        # has sent its answer. Waking inside the task would queue the waiters
        # ahead of this task's resumption, so a registration's reply would wait
        # for every one of its waiters to be answered first (30-40 ms for 1,000).
        self._wake(record.rank)
        return record

    async def _put(self, record: Record) -> None:
        try:
            await self._store.put(record)
        finally:
            self._writing -= 1

    def _wake_if_stored(self, rank: int, stored: asyncio.Future[None]) -> None:
        if not stored.cancelled() and stored.exception() is None:
            self._wake(rank)

    def _wake(self, rank: int) -> None:
        waitlist = self._waitlists.get(rank)
        if waitlist is not None:
            waitlist.event.set()
            waitlist.event = asyncio.Event()

    def _check_room(self, rank: int) -> None:
        # Replacing a stored rank never needs room; only a new rank does.
        if self._max_ranks is None or len(self._store) < self._max_ranks or rank in self:
            return
        raise TooManyRanks(
            f"The server already stores {len(self._store)} distinct ranks, its limit; "
            "unregister one, or give the server a world size or a higher rank limit."
        )

    async def unregister(self, rank: int) -> Record | None:
        """Forget a rank's info; its waiters go on waiting for a new one."""
        if self._closed:
            raise ShuttingDown("The server is shutting down.")
        if self._store.get(rank) is None:
            return None
        self._version += 1
        return await self._store.delete(rank, self._version)

    def close(self) -> None:
        """Answer every parked wait with :class:`ShuttingDown`; refuse new changes.

        The store stays open: whoever opened it closes it.
        """
        self._closed = True
        for waitlist in self._waitlists.values():
            waitlist.event.set()

    # -- waiting -------------------------------------------------------

    def fresh(self, rank: int, after: int = 0) -> Record | None:
        """The rank's record if its version is greater than ``after``."""
        record = self._store.get(rank)
        if record is not None and record.version > after:
            return record
        return None

    async def wait(self, rank: int, timeout: float, after: int = 0) -> Record | None:
        """The rank's record newer than ``after``, waiting up to ``timeout`` seconds.

        Returns ``None`` when the time runs out first.
        """
        record = self.fresh(rank, after)
        if record is not None or timeout <= 0:
            return record
        # _park/_unpark in try/finally rather than a context manager: a woken
        # waiter leaves through here, a thousand in a row after one
        # registration, and a generator-based manager costs a few calls more.
        self._park()
        try:
            async with asyncio.timeout(timeout):
                return await self._arrival(rank, after)
        except TimeoutError:
            return None
        finally:
            self._unpark()

    async def wait_all(
        self, ranks: Iterable[int], timeout: float, after: int = 0
    ) -> tuple[list[Record], list[int]]:
        """Every rank's record newer than ``after``, waiting up to ``timeout`` seconds.

        Returns the records found (in the order asked) and the ranks still
        missing when the time ran out (empty when all arrived).
        """
        wanted = list(dict.fromkeys(ranks))
        missing = [rank for rank in wanted if self.fresh(rank, after) is None]
        if missing and timeout > 0:
            self._park()
            try:
                async with asyncio.timeout(timeout):
                    # A rank unregistered while we waited for a later one
                    # is missing again: go round until none is.
                    while missing:
                        for rank in missing:
                            await self._arrival(rank, after)
                        missing = [r for r in wanted if self.fresh(r, after) is None]
            except TimeoutError:
                pass
            finally:
                self._unpark()
        found: list[Record] = []
        missing = []
        for rank in wanted:
            record = self.fresh(rank, after)
            if record is None:
                missing.append(rank)
            else:
                found.append(record)
        return found, missing

    def _park(self) -> None:
        """Count a parked wait, or refuse it (closed, or the lot is full)."""
        if self._closed:
            raise ShuttingDown("The server is shutting down.")
        lot = self._lot
        if lot.limit is not None and lot.parked >= lot.limit:
            raise TooManyWaiters(
                f"The server already holds {lot.parked} waiting requests, its limit; retry later."
            )
        self._parked += 1
        lot.parked += 1

    def _unpark(self) -> None:
        self._parked -= 1
        self._lot.parked -= 1

    async def _arrival(self, rank: int, after: int) -> Record:
        """Wait, with no time limit, until the rank has a record newer than ``after``."""
        waitlist = self._waitlists.get(rank)
        if waitlist is None:
            waitlist = self._waitlists[rank] = _Waitlist()
        waitlist.waiters += 1
        try:
            while True:
                record = self.fresh(rank, after)
                if record is not None:
                    return record
                if self._closed:
                    raise ShuttingDown("The server is shutting down.")
                await waitlist.event.wait()
        finally:
            waitlist.waiters -= 1
            if waitlist.waiters == 0 and self._waitlists.get(rank) is waitlist:
                del self._waitlists[rank]
