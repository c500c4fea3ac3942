"""The Redis store's change feed: the reader, this process's own writes, and the watcher of restarts.

The reader: one task per process blocks in ``XREAD`` on its own connection,
from the last entry id it saw (read once at open, never ``$``), and hands
each batch to the listener. Each entry carries ``seq``: an entry that is not
the one after the last seen means entries were trimmed or the data flushed,
and the listener is told to :meth:`~ChangeListener.resync`. So it is after
the reader reconnects.

The watcher polls the incarnation and ``seq`` about once a second: a new
incarnation, or a reader that has not reached the ``seq`` of the previous
poll (stuck, or too far behind), restarts the reader at the stream's tail
and announces a resync. A missed wake needs the feed, the seq check and the
watcher to miss it together.

Local writes: a put or delete made through this store announces its own
change when its script returns, record and all (a local waiter needs no
round trip), and the listener hears it once: while a write of this process
is under way (:meth:`Feed.writing`), the reader holds back the feed's
entries for that key, and the write drops its own entry (or remembers its
version, for the reader to drop when it arrives) and announces the others it
held, in version order. So a change may be heard out of feed order by at
most the duration of one local write to the same key, never lost; a
listener that hears a change twice (after a resync, say) is not confused: a
change means "re-check this key".

The in-order listener (``tap``, which ``Store.follow_in_order`` names: the
watch history) hears every entry as the reader reads it, this process's own
included, in the stream's order, which is each namespace's version order:
its key, its version and, for a set record, the member it added or removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Iterator, Sequence
from typing import Any, cast

from ...exceptions import StoreUnavailable
from ..interface import ChangeListener
from ..records import NO_RANK, Change, Key
from ..stopping import stop_task
from . import lua
from .connection import Connection, reason, reraise_cancellation
from .keys import NAMED, Keys, text

__all__ = ["Feed", "block_seconds"]

logger = logging.getLogger("aiobootstrap")

_NAMED = ord(NAMED)
"""The first byte of a named record's field."""

_LOCAL_REMEMBERED = 4096
"""Changes of this process the reader may still meet on the feed (to drop them); the oldest go first."""


def block_seconds(poll_interval: float) -> float:
    """How long the reader's ``XREAD`` blocks: a second, or the watcher's interval when that is shorter."""
    return min(1.0, poll_interval)


class Feed:
    """The change feed of one store: what the listener hears, and the tasks that make sure it hears it."""

    def __init__(self, connection: Connection, keys: Keys, *, poll_interval: float) -> None:
        self._connection = connection
        self._keys = keys
        self._poll_interval = poll_interval
        self._listener: ChangeListener | None = None
        self.incarnation = ""
        """What the last reply said; the boot id."""
        self._feed_incarnation = ""
        """The incarnation the reader's position belongs to."""
        self._last_id: bytes | str = "0-0"
        self._last_seq = 0
        self._local: dict[tuple[str, int], None] = {}
        """This process's changes, already announced, that the reader may still meet on the feed."""
        self._in_flight: dict[Key, int] = {}
        """Keys with a write of this process under way, and how many."""
        self._held: dict[Key, list[Change]] = {}
        """The feed's entries for keys in ``_in_flight``, held until the write returns."""
        self.tap: ChangeListener | None = None
        """Hears every entry in the stream's order, this process's own included (``Store.follow_in_order``);
        ``None``: nobody asked."""
        self.reader: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._check_now = asyncio.Event()

    async def poll(self) -> tuple[str, int, bytes | str]:
        """The incarnation (made when there is none), ``seq`` and the stream's last entry id, atomically."""
        keys = self._keys
        reply = await self._connection.read(
            lambda client: self._connection.run(
                client, lua.WATCH, [keys.incarnation, keys.seq, keys.feed], [secrets.token_hex(8)]
            )
        )
        return text(reply[0]), int(reply[1]), reply[2]

    def start(self, listener: ChangeListener, position: tuple[str, int, bytes | str]) -> None:
        """Start the reader from ``position`` (a :meth:`poll`), and the watcher."""
        self._listener = listener
        incarnation, self._last_seq, self._last_id = position
        self.incarnation = self._feed_incarnation = incarnation
        self.reader = asyncio.create_task(self._read(), name="aiobootstrap redis feed")
        self._watcher = asyncio.create_task(self._watch(), name="aiobootstrap redis watcher")

    async def stop(self) -> None:
        # The watcher first: it may be restarting the reader.
        watcher, self._watcher = self._watcher, None
        await stop_task(watcher)
        reader, self.reader = self.reader, None
        await stop_task(reader)
        self._listener = None

    # -- this process's writes ----------------------------------------------

    @contextlib.contextmanager
    def writing(self, key: Key) -> Iterator[None]:
        """While a write to ``key`` is under way: the feed's entries for it are held back (see the top).

        A write that fails lets them go; one that returns says what it did,
        with :meth:`wrote` or :meth:`wrote_nothing`.
        """
        in_flight = self._in_flight
        in_flight[key] = in_flight.get(key, 0) + 1
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            if in_flight[key] == 1:
                del in_flight[key]
            else:
                in_flight[key] -= 1
            if failed:
                self.wrote_nothing(key)

    def wrote(self, change: Change) -> None:
        """Announce a write of this process, record and all, with the feed's entries held back for its key."""
        held = self._held.pop(change.key, [])
        own = [entry for entry in held if entry.version == change.version]
        if not own:
            # The entry is still to come: the reader drops it when it does.
            local = self._local
            local[(change.key.namespace, change.version)] = None
            if len(local) > _LOCAL_REMEMBERED:
                del local[next(iter(local))]
        others = [entry for entry in held if entry.version != change.version]
        self._announce(sorted([change, *others], key=lambda entry: entry.version))

    def wrote_nothing(self, key: Key) -> None:
        """A write to ``key`` changed nothing (or failed): announce what the feed held back for it."""
        held = self._held.pop(key, None)
        if held:
            self._announce(held)

    def saw(self, incarnation: str) -> None:
        """A reply named ``incarnation``: a new one wakes the watcher at once."""
        self.incarnation = incarnation
        if incarnation != self._feed_incarnation:
            self._check_now.set()

    def lost(self) -> None:
        """A reply found no incarnation (the data is gone): the watcher makes one now, not in a second."""
        self._check_now.set()

    # -- the reader -----------------------------------------------------------

    async def _read(self) -> None:
        where = self._connection.where
        delay = 0.05
        failed = False
        block_ms = int(block_seconds(self._poll_interval) * 1000)
        while True:
            client = self._connection.feed_client
            if client is None:
                return
            try:
                reply = await client.xread({self._keys.feed: self._last_id}, count=1000, block=block_ms)
                # redis-py can return normally from a read that was cancelled
                # as its reply arrived: look, or the reader never stops.
                reraise_cancellation()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the reader must outlive anything a connection can throw
                reraise_cancellation()
                if not failed:
                    logger.warning(
                        "Redis at %s is unreachable: the change feed broke (%s); reconnecting. Writes are "
                        "refused with 503 and waits stay parked until it is back.",
                        where,
                        reason(exc),
                    )
                failed = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if failed:
                failed, delay = False, 0.05
                logger.info("The change feed of %s is back; re-checking every waited-for key.", where)
                self._resync()
            if reply:
                self._deliver(cast(Any, reply)[0][1])

    def _deliver(self, entries: Sequence[tuple[bytes, dict[bytes, bytes]]]) -> None:
        """Announce a batch of ``XREAD`` entries (RESP2, raw bytes)."""
        changes: list[Change] = []
        every: list[Change] = []
        gap = False
        gap_at = 0  # where in `every` the entries after the last gap begin
        for entry_id, fields in entries:
            seq = int(fields[b"s"])
            if seq != self._last_seq + 1:
                gap = True
                gap_at = len(every)
            self._last_seq, self._last_id = seq, entry_id
            namespace = fields[b"n"].decode()
            version = int(fields[b"v"])
            at = fields[b"i"]  # a rank's field, or a name's, ":NAME" (``keys``)
            if at[0] == _NAMED:
                key = Key(namespace, fields[b"k"].decode(), fields[b"r"].decode(), NO_RANK, at[1:].decode())
            else:
                key = Key(namespace, fields[b"k"].decode(), fields[b"r"].decode(), int(at))
            marked = fields.get(b"m")  # older entries have none
            member = marked.decode() if marked is not None and marked != b"-" else None
            change = Change(key, version, deleted=fields[b"o"] == b"del", member=member)
            every.append(change)
            if (namespace, version) in self._local:
                del self._local[(namespace, version)]
                continue
            if key in self._in_flight:
                # Perhaps our own write, whose reply is on its way: the write announces it.
                self._held.setdefault(key, []).append(change)
            else:
                changes.append(change)
        if changes:
            self._announce(changes)
        tap = self.tap
        if tap is not None and every:
            # The entries after a gap follow on from it, not from what the tap heard before.
            if gap_at:
                self._announce(every[:gap_at], tap)
            if gap:
                self._resync_one(tap)
            if gap_at < len(every):
                self._announce(every[gap_at:], tap)
        if gap:
            logger.info(
                "The change feed of %s skipped changes; re-checking every waited-for key.",
                self._connection.where,
            )
            self._local.clear()
            self._resync(tap=False)  # told above, in its place among the entries

    def _announce(self, changes: Sequence[Change], listener: ChangeListener | None = None) -> None:
        listener = self._listener if listener is None else listener
        if listener is None or self._listener is None:
            return
        try:
            listener.changed(changes)
        except Exception:
            logger.exception("The change listener failed")

    def _resync(self, *, tap: bool = True) -> None:
        if tap and self.tap is not None:
            self._resync_one(self.tap)
        if self._listener is not None:
            self._resync_one(self._listener)

    def _resync_one(self, listener: ChangeListener) -> None:
        if self._listener is None:
            return
        try:
            listener.resync()
        except Exception:
            logger.exception("The change listener failed to resync")

    # -- the watcher ----------------------------------------------------------

    async def _watch(self) -> None:
        """The backstop: a new incarnation, or a reader stuck behind, restarts the feed with a resync."""
        behind: int | None = None
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._poll_interval):
                    await self._check_now.wait()
            self._check_now.clear()
            # What the reader had seen before the poll was sent: the counter the poll reads can only
            # be at or past it. The reader may run further while the reply is on its way (a command
            # connection slower than the feed's), and a counter behind *that* has not gone back.
            seen = self._last_seq
            try:
                incarnation, seq, last_id = await self.poll()
            except StoreUnavailable:
                reraise_cancellation()
                behind = None
                continue
            self.incarnation = incarnation
            why = None
            if incarnation != self._feed_incarnation:
                why = "its data was lost or flushed (a new incarnation)"
            elif seq < seen:
                why = "its change counter went back"
            elif behind is not None and self._last_seq < behind:
                why = "the feed reader fell behind"
            if why is None:
                behind = seq if seq > self._last_seq else None
                continue
            behind = None
            log = logger.warning if incarnation != self._feed_incarnation else logger.info
            log("Redis at %s: %s; re-checking every waited-for key.", self._connection.where, why)
            await self._restart_reader(incarnation, seq, last_id)

    async def _restart_reader(self, incarnation: str, seq: int, last_id: bytes | str) -> None:
        await stop_task(self.reader)
        # The tail was read before the listener re-reads: nothing falls between.
        self._feed_incarnation = incarnation
        self._last_seq, self._last_id = seq, last_id
        self._local.clear()
        self._resync()
        self.reader = asyncio.create_task(self._read(), name="aiobootstrap redis feed")
