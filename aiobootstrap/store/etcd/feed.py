"""The etcd store's change feed: etcd's watch from a revision, the boot id, and the watchdog.

The reader: one task watches the range ``[P/c, P/e)`` (``keys``) from the
revision after the last it heard. Each put of ``P/c`` is one transaction's
changes, in revision order, which is every namespace's version order, on
every replica alike; a deletion of a lease's marker ``P/d/LEASE`` is that
lease's end (told to each :class:`LeaseEnds` subscribed, which releases its records). A watch that
breaks (the member died, lost its leader: ``hasleader``) is made again from
the next revision on the next member, and misses nothing; only a revision
etcd has compacted away is a gap, and the listener is told to
:meth:`~ChangeListener.resync`.

Writes wait for their own revision (:meth:`Feed.reached`): when a write
returns, its change has been announced. So the feed is in the store's
order, this process's writes included (``follow_in_order`` is ``False``).

The boot id is ``P/boot``, made once with a put-if-absent. Every read also
reads it (:meth:`Feed.check_boot`): missing, the cluster lost this
registry's data (a wiped cluster, a restore from an old snapshot), so no
read is an answer (``503``) until a new one is made; another one, it is
taken. The watchdog polls ``P/boot`` and ``P/c`` about once a second: a new
or missing boot id, a revision that went back, or a reader that has not
reached the ``P/c`` of the previous poll restarts the reader (and resyncs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import Protocol

from ...exceptions import StoreUnavailable
from ..interface import ChangeListener
from ..records import Change
from ..stopping import stop_task
from . import messages as m
from .connection import Connection, reason
from .keys import Keys, decode_changes

__all__ = ["Feed", "LeaseEnds"]

logger = logging.getLogger("aiobootstrap")


class LeaseEnds(Protocol):
    """Hears the leases the feed saw end (the store's leases, which release their records)."""

    def ended(self, lease: str) -> None:
        """``lease``'s marker was deleted: etcd ended the lease."""

    def lost(self) -> None:
        """The reader restarted on a new history: ends may have been missed."""


class Feed:
    """What the listener hears, and the tasks that make sure it hears it."""

    def __init__(self, connection: Connection, keys: Keys, *, poll_interval: float) -> None:
        self._connection = connection
        self._keys = keys
        self._poll_interval = poll_interval
        self._listener: ChangeListener | None = None
        self.incarnation = ""
        self.revision = 0
        """The last revision the reader heard (or started after)."""
        self._lease_ends: tuple[LeaseEnds, ...] = ()
        self._reached = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._check_now = asyncio.Event()

    # -- the boot id -------------------------------------------------------

    async def boot(self) -> tuple[str, int]:
        """The boot id, made when there is none, and the revision it was read at."""
        k = self._keys
        new = secrets.token_hex(8).encode()
        reply = await self._connection.call(
            lambda client: m.run(client, [m.absent(k.boot)], [m.put(k.boot, new)], [m.get(k.boot)])
        )
        if reply.succeeded:
            return new.decode(), reply.revision
        return reply.reads[0][0].value.decode(), reply.revision

    def follow_lease_ends(self, listener: LeaseEnds) -> None:
        """Tell ``listener`` of each lease's end the feed hears, and of each restart that may have missed one."""
        self._lease_ends = (*self._lease_ends, listener)

    def check_boot(self, boot: bytes | None) -> None:
        """A read found ``boot`` (``None``: missing): what it read is no answer unless it is ours."""
        if boot is None:
            self._check_now.set()
            raise StoreUnavailable(
                f"etcd at {self._connection.where} holds none of this registry's data (the cluster was "
                "wiped or restored): a new boot id is being made; retry."
            )
        if boot.decode() != self.incarnation:
            self.incarnation = boot.decode()
            self._check_now.set()

    # -- starting and stopping ------------------------------------------------

    def start(self, listener: ChangeListener, incarnation: str, revision: int) -> None:
        self._listener = listener
        self.incarnation, self.revision = incarnation, revision
        self._feed_incarnation = incarnation
        self._reader = asyncio.create_task(self._read(), name="aiobootstrap etcd feed")
        self._watchdog = asyncio.create_task(self._watch(), name="aiobootstrap etcd watchdog")

    async def stop(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        await stop_task(watchdog)
        reader, self._reader = self._reader, None
        await stop_task(reader)
        self._listener = None
        self._reached.set()

    async def reached(self, revision: int, timeout: float) -> None:
        """Return once the reader heard ``revision`` (or after ``timeout``: it will resync when back)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self.revision < revision and self._reader is not None:
                    await self._reached.wait()

    # -- the reader -----------------------------------------------------------

    async def _read(self) -> None:
        delay, failed = 0.05, False
        start, end = self._keys.watched
        while True:
            client = self._connection.client()
            try:
                async with asyncio.timeout(self._connection.timeout):
                    watch = await client.watch(start, range_end=end, start_revision=self.revision + 1)
                if failed:
                    failed, delay = False, 0.05
                    logger.info("The change feed of etcd at %s is back.", self._connection.where)
                try:
                    async for event in watch:
                        self._heard(event)
                finally:
                    # Or aetcd keeps queueing its events for nobody (a reader restarted by the watchdog).
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(1.0):
                            await watch.cancel()
                raise ConnectionError("the watch ended")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the reader must outlive anything a watch can throw
                compacted = getattr(exc, "compacted_revision", None)
                if compacted is not None:
                    logger.info(
                        "etcd at %s compacted the revisions the feed needed; re-checking every waited-for key.",
                        self._connection.where,
                    )
                    self.revision = max(self.revision, int(compacted) - 1)
                    self._resync()
                    continue
                # The next watch from another member, on a new client (a refused token renewed with it).
                self._connection.failed(client)
                self._connection.renew(client)
                if not failed:
                    logger.warning(
                        "etcd at %s: the change feed broke (%s); watching again. Writes answer 503 and "
                        "waits stay parked until it is back.",
                        self._connection.where,
                        reason(exc),
                    )
                failed = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _heard(self, event: object) -> None:
        kv = getattr(event, "kv")  # noqa: B009 - aetcd's Event has no type hints
        revision = int(kv.mod_revision)
        if revision <= self.revision:
            return
        key, kind = bytes(kv.key), str(getattr(event, "kind"))  # noqa: B009
        if key == self._keys.changes and kind.endswith("PUT"):
            namespace, rows = decode_changes(bytes(kv.value))
            del namespace
            changes = [Change(k, v, deleted=d, member=mem) for k, v, d, mem in rows]
            self._announce(changes)
        elif key.startswith(self._keys.markers) and kind.endswith("DELETE"):
            lease = self._keys.lease_of(key)
            for listener in self._lease_ends:
                listener.ended(lease)
        self.revision = revision
        self._reached.set()
        self._reached = asyncio.Event()

    def _announce(self, changes: list[Change]) -> None:
        listener = self._listener
        if listener is None or not changes:
            return
        try:
            listener.changed(changes)
        except Exception:
            logger.exception("The change listener failed")

    def _resync(self) -> None:
        listener = self._listener
        if listener is not None:
            try:
                listener.resync()
            except Exception:
                logger.exception("The change listener failed to resync")

    # -- the watchdog ---------------------------------------------------------

    async def _watch(self) -> None:
        behind: int | None = None
        k = self._keys
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._poll_interval):
                    await self._check_now.wait()
            self._check_now.clear()
            seen = self.revision
            try:
                reply = await self._connection.call(
                    lambda client: m.read(client, [m.get(k.boot), m.get(k.changes)]), read=True
                )
                boot_found, last_found = reply.reads
                if not boot_found:
                    incarnation, revision = await self.boot()
                else:
                    incarnation, revision = boot_found[0].value.decode(), reply.revision
            except StoreUnavailable:
                behind = None
                continue
            last = last_found[0].mod_revision if last_found else 0
            why = None
            if incarnation != self._feed_incarnation:
                why = "its data was lost (a new boot id)"
            elif revision < seen:
                why = "its revision went back (a cluster restored or replaced)"
            elif behind is not None and self.revision < behind:
                why = "the change feed fell behind"
            self.incarnation = incarnation
            if why is None:
                behind = last if last > self.revision else None
                continue
            behind = None
            log = logger.warning if incarnation != self._feed_incarnation else logger.info
            log("etcd at %s: %s; re-checking every waited-for key.", self._connection.where, why)
            await self._restart(incarnation, revision if why != "the change feed fell behind" else None)

    async def _restart(self, incarnation: str, revision: int | None) -> None:
        """Start the reader again: after ``revision`` (a new history: resync), or where it was."""
        await stop_task(self._reader)
        self._feed_incarnation = incarnation
        if revision is not None:
            self.revision = revision
            self._resync()
            for listener in self._lease_ends:
                listener.lost()
        self._reader = asyncio.create_task(self._read(), name="aiobootstrap etcd feed")
