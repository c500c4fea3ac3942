"""The file store: records in memory, every change journaled and synced before it is acknowledged.

Theory of operation
-------------------
The records live in :class:`~aiobootstrap.store.tables.Tables`, the memory
store's own rules; the journal (``store.journal``) is their durable history.
A ``put`` or ``delete`` is stamped and checked against the limits at once, on
the event loop, then queued; it is acknowledged, applied to the tables and
announced on the feed only after its line is on disk, so nothing a reader or
a waiter ever saw can be lost by a crash. Reloading replays the lines with
the rules a live change follows (``store.entries``).

Changes queued but not yet on disk are *staged* (``store.staging``): they
hold their versions and the room they take under the limits.

Group commit: changes queue up while the worker thread writes and syncs the
previous batch, and the next batch takes everything queued, in one write and
one sync. A storm of registrations pays one sync per batch, not one per
registration. All file I/O happens on the journal's one worker thread, so the
event loop never blocks on the disk and the writes keep their order; lines are
encoded on the loop, because on the worker thread the encoding would hold the
GIL against the loop while the write and the sync release it.

Compaction: on open, and whenever the file has grown to several times what the
live records need, the journal is rewritten to a ``base`` line and the live
records, atomically (side file, sync, rename, sync the directory).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .entries import delete_entry, hold_entry, put_entry, replay, snapshot
from .interface import ABSENT, ChangeListener, ignore_changes
from .journal import JournalFile, JournalMissing, StateFileError, encode_line, reason
from .lease_entries import end_entry, grant_entry, member_leases
from .leases import Lease
from .limits import StoreLimits
from .members import with_member
from .records import Change, Key, Record
from .staging import FailureLog, Pending, Staged, not_saved
from .tables import LocalStore

__all__ = ["FileStore", "StateFileError"]

log = logging.getLogger("aiobootstrap")

COMPACT_MIN_BYTES = 1 << 20
"""A journal smaller than this is never compacted while running."""

COMPACT_RATIO = 4
"""Compact once the journal is this many times larger than its live records."""

_CLOSED = "The state file is closed: the server is shutting down."

_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


class FileStore(LocalStore):
    """Records in memory, made durable in a journal file (``--state-file``, ``file:PATH``)."""

    def __init__(self, path: str, limits: StoreLimits | None = None) -> None:
        super().__init__(limits, granted=self._lease_granted, ended=self._lease_ended)
        self._file = JournalFile(path)
        self._incarnation = ""
        self._listener = ignore_changes()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aiobootstrap-journal")
        self._staged = Staged()
        self._pending: list[Pending] = []
        self._latest: dict[Key, Pending] = {}
        """Each key's last change queued and not yet on disk: what a set member change builds on."""
        self._flusher: asyncio.Task[None] | None = None
        self._live_bytes: dict[Key, int] = {}
        """Each live record's line length: what a compacted journal holds for it."""
        self.skipped = 0
        """How many unreadable lines the load skipped."""
        self.skipped_ranks = 0
        """How many registrations of ranks past 18 digits (an older version's) the load skipped."""
        self._failures = FailureLog()
        self._closed = False

    @property
    def incarnation(self) -> str:
        return self._incarnation

    @property
    def description(self) -> str:
        return f"file {self._file.path}"

    @property
    def path(self) -> str:
        return str(self._file.path)

    def __len__(self) -> int:
        """How many records the file holds."""
        return len(self._tables)

    # -- opening and closing -------------------------------------------

    async def open(self, listener: ChangeListener) -> None:
        """Load the file (created when missing), compact it, and hold it open for appends.

        Raises :class:`StateFileError` with a one-line detail when the file
        cannot be used; a torn or corrupt line never does.
        """
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._load)
        except BaseException:
            await loop.run_in_executor(self._executor, self._file.close)
            self._executor.shutdown(wait=False)
            raise
        self._listener = listener
        # Every lease has its full TTL again from now: no worker is expired by the outage.
        self._leases.renew_all()
        self._lease_calls.arm()
        log.info(
            "state file %s: loaded %d registration(s), version %d, %d lease(s)",
            self.path,
            len(self._tables),
            self._tables.high,
            len(self._leases),
        )

    def _load(self) -> None:
        # On the worker thread, before anyone else can see the store.
        entries, problems = self._file.read()
        found = replay(entries, problems, self._tables, self.path, self._leases)
        # A journal from before incarnations, or a new one: its data starts a life here.
        self._incarnation = found.incarnation or secrets.token_hex(8)
        self._live_bytes = found.live_bytes
        self.skipped, self.skipped_ranks = len(problems), found.skipped_ranks
        try:
            self._file.rewrite(self._snapshot())
        except OSError as exc:
            if exc.errno not in _DISK_FULL:
                raise StateFileError(f"Cannot use the state file {self.path}: {reason(exc)}.") from None
            # The journal as it is loads fine: a full disk must not keep the
            # server from starting on it. A torn tail is cut at the first append.
            log.warning(
                "state file %s: cannot compact it at start (%s); serving from it as it is",
                self.path,
                reason(exc),
            )
        self._file.keep_reserve()

    async def close(self) -> None:
        """Finish the changes already asked for, then close the file."""
        if self._closed:
            return
        await self._lease_calls.close()
        self._closed = True
        self._listener = ignore_changes()
        if self._flusher is not None:
            await self._flusher
        await asyncio.get_running_loop().run_in_executor(self._executor, self._file.close)
        self._executor.shutdown(wait=False)

    # -- reading -------------------------------------------------------

    async def ping(self) -> None:
        if self._closed:
            raise StateFileError(_CLOSED)

    # -- changing ------------------------------------------------------

    async def put(self, key: Key, value: dict[str, Any], lease: str | None = None) -> Record:
        held = None if lease is None else self._leases.find(key.namespace, lease)
        change = self._queue_put(key, value, {} if held is None else {"lease": held.id})
        self._leases.attach((key, None), held)
        await self._commit(change)
        return change.record  # type: ignore[return-value]

    async def put_if(
        self, key: Key, value: dict[str, Any], version: int, lease: str | None = None
    ) -> Record | None:
        # Compared with the key's latest change, queued or landed, and queued
        # before the first await (in ``put``): no other write comes in between.
        pending = self._latest.get(key)
        current = self._tables.get(key) if pending is None else pending.record
        if (ABSENT if current is None else current.version) != version:
            if pending is not None:
                # Refused by a write not on disk yet: answer once it has landed, as a read then shows it.
                # Answering at once let a caller's read, compare, read loop spin without ever yielding
                # to the journal's writer (issue 41, item 1).
                await asyncio.wait((pending.done,))
            return None
        return await self.put(key, value, lease)

    def _queue_put(self, key: Key, value: dict[str, Any], fields: dict[str, Any]) -> Pending:
        """A put stamped, checked and holding its room: committed by the caller, before any await."""
        staged, tables = self._staged, self._tables
        tables.check_room(
            key,
            staged_ranks=staged.ranks_of(key),
            staged_namespaces=staged.namespaces,
            staged_tables=staged.ranks,
        )
        record = Record(key, value, staged.stamp(key.namespace, tables), time.time())
        line = encode_line({**put_entry(record), **fields})
        change = Pending(key, record.version, line, record, self._future())
        # The room is held until the change has landed or failed, even when
        # the caller stops waiting for it.
        staged.hold(key)
        change.done.add_done_callback(lambda _: staged.release(key, tables, put=True))
        return change

    async def set_member(
        self, key: Key, member: str, *, present: bool, lease: str | None = None
    ) -> Record | None:
        held_by = None if lease is None or not present else self._leases.find(key.namespace, lease)
        return await self._set_member(key, member, present, held_by)

    async def _set_member(self, key: Key, member: str, present: bool, lease: Lease | None) -> Record | None:
        # Built on the key's latest change, queued or landed, and queued before
        # the first await: two member changes in flight never lose each other.
        pending = self._latest.get(key)
        current = self._tables.get(key) if pending is None else pending.record
        value = with_member(None if current is None else current.value, member, present=present)
        moved = (self._leases.lease_of((key, member)) or ("",))[0] != ("" if lease is None else lease.id)
        if value is not None:
            held = member_leases(self._leases, key, value["members"])
            held.pop(member, None)
            if lease is not None:
                held[member] = lease.id
            change = self._queue_put(key, value, {"leases": held} if held else {})
            change.member = ("+" if present else "-") + member
            self._leases.attach((key, member), lease)
            await self._commit(change)
            return change.record
        if present:
            # Listed already: it is the new lease's (or none's) now, even from a lease ending.
            self._leases.attach((key, member), lease)
        if present and moved:
            # A line of its own, and no new version: the list did not change.
            await self._commit_lease_line(hold_entry(key, lease, member))
        elif pending is not None:
            # Unchanged, but only once what it is unchanged from is on disk.
            await asyncio.shield(pending.done)
        return current

    async def delete(self, key: Key) -> Record | None:
        pending = self._latest.get(key)
        if (self._tables.get(key) if pending is None else pending.record) is None:
            return None
        staged, tables = self._staged, self._tables
        version = staged.stamp(key.namespace, tables)
        change = Pending(key, version, encode_line(delete_entry(key, version)), None, self._future())
        # The staged version is let go once the change has landed or failed.
        change.done.add_done_callback(lambda _: staged.release(key, tables, put=False))
        self._leases.attach((key, None), None)
        return await self._commit(change)

    # -- leases: granted and ended are journaled (``local_leases`` calls these); a keepalive is not
    # (a restart renews every lease) --

    async def _lease_granted(self, lease: Lease) -> None:
        await self._commit_lease_line(grant_entry(lease))

    async def _lease_ended(self, lease: Lease) -> None:
        await self._commit_lease_line(end_entry(lease))

    async def _commit_lease_line(self, entry: dict[str, Any]) -> None:
        key = Key("", "", "", 0)  # a lease's line changes no record
        await self._commit(Pending(key, 0, encode_line(entry), None, self._future(), lease_line=True))

    @staticmethod
    def _future() -> asyncio.Future[Record | None]:
        return asyncio.get_running_loop().create_future()

    async def _commit(self, change: Pending) -> Record | None:
        if self._closed:
            raise StateFileError(_CLOSED)
        self._pending.append(change)
        if not change.lease_line:
            self._latest[change.key] = change
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush())
        # Cancelling this wait does not cancel the change: the flusher writes,
        # applies and announces it anyway, so memory always matches the file.
        return await asyncio.shield(change.done)

    def _landed(self, change: Pending) -> None:
        if self._latest.get(change.key) is change:
            del self._latest[change.key]

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    batch = await self._write(loop, batch)
                except Exception as exc:
                    self._fail(batch, exc)
                    continue
                self._failures.recovered(self.path)
                changes = [self._apply(change) for change in batch]
                self._listener.changed([c for c in changes if c is not None])
                if self._file.size > max(COMPACT_MIN_BYTES, COMPACT_RATIO * sum(self._live_bytes.values())):
                    await self._compact(loop)
        finally:
            self._flusher = None

    async def _write(self, loop: asyncio.AbstractEventLoop, batch: list[Pending]) -> list[Pending]:
        """Append ``batch``; what was written, which may be less (its deletions alone, on a full disk)."""
        data = b"".join(change.line for change in batch)
        try:
            await loop.run_in_executor(self._executor, self._file.append, data)
            return batch
        except JournalMissing:
            # Deleted underneath: the whole state, written afresh at the path,
            # is what a restart must find; then the batch goes on top of it.
            await loop.run_in_executor(self._executor, self._file.rewrite, self._snapshot())
            log.warning(
                "state file %s: it was deleted while the server ran; wrote the whole state afresh", self.path
            )
            await loop.run_in_executor(self._executor, self._file.append, data)
            return batch
        except OSError as exc:
            deletions = [change for change in batch if change.record is None]
            if exc.errno not in _DISK_FULL or not deletions:
                raise
            # A full disk: the reserve kept beside the journal makes room for
            # deletions, which is how an operator frees space through the API.
            freed = await loop.run_in_executor(self._executor, self._file.release_reserve)
            if not freed:
                raise
            self._fail([change for change in batch if change.record is not None], exc)
            data = b"".join(change.line for change in deletions)
            await loop.run_in_executor(self._executor, self._file.append, data)
            log.warning("state file %s: the disk is full; used the reserve to write deletions", self.path)
            return deletions

    def _apply(self, change: Pending) -> Change | None:
        self._landed(change)
        tables = self._tables
        key = change.key
        if change.lease_line:
            change.done.set_result(None)
            return None
        if change.record is not None:
            tables.apply_put(change.record)
            self._live_bytes[key] = len(change.line)
            change.done.set_result(change.record)
            return Change(key, change.version, change.record, member=change.member)
        removed = tables.apply_delete(key, change.version)
        if removed is not None:
            self._live_bytes.pop(key, None)
        change.done.set_result(removed)
        return Change(key, change.version, deleted=True) if removed is not None else None

    def _fail(self, batch: list[Pending], exc: Exception) -> None:
        if not batch:
            return
        # Anything but a disk error would be a bug; the callers must hear either way.
        self._failures.failed(self.path, len(batch), exc)
        for change in batch:
            self._landed(change)
            change.done.set_exception(not_saved(exc))

    # -- compaction ----------------------------------------------------

    async def _compact(self, loop: asyncio.AbstractEventLoop) -> None:
        before = self._file.size
        try:
            await loop.run_in_executor(self._executor, self._file.rewrite, self._snapshot())
        except OSError as exc:
            # The journal itself is intact: appends go on, and a later batch tries again.
            log.warning("state file %s: compaction failed, journal kept as is: %s", self.path, exc)
            return
        log.info("state file %s: compacted from %d to %d bytes", self.path, before, self._file.size)
        await loop.run_in_executor(self._executor, self._file.keep_reserve)

    def _snapshot(self) -> list[bytes]:
        # Taken on the loop while the flusher waits (or before anyone sees the
        # store): no change lands until the rewrite is done.
        lines, self._live_bytes = snapshot(self._tables, self._incarnation, self._leases)
        return lines
