"""A durable record store: every change journaled and synced before it returns.

Theory of operation
-------------------
The store keeps every record in memory, as :class:`MemoryStore` does, and
writes each change to a journal file first (format and file handling in
``_journal_file``): a ``put`` or ``delete`` returns only after its line is on
disk, and only then does the change show in memory, so nothing a reader or a
waiter ever saw can be lost by a crash. Reloading replays the lines with the
rules a live change follows (:meth:`JournalStore._apply`): a put replaces an
older version of its rank, a delete removes an older one.

Group commit: changes queue up while the worker thread writes and syncs the
previous batch, and the next batch takes everything queued, in one write and
one sync. A storm of registrations pays one sync per batch, not one per
registration, and none waits behind more than one sync in progress. All file
I/O happens on the store's one worker thread, so the event loop never blocks
on the disk and the writes keep their order; lines are encoded on the loop,
because on the worker thread the encoding would hold the GIL against the loop
while the write and the sync release it.

Compaction: on open, and whenever the file has grown to several times what
its live records need, the store rewrites it to just the live records,
atomically (side file, sync, rename, sync the directory).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from ._journal_file import JournalFile, StateFileError, encode_line, reason
from ._registry import MemoryStore, Record

__all__ = ["JournalStore", "StateFileError"]

log = logging.getLogger("aiobootstrap")

COMPACT_MIN_BYTES = 1 << 20
"""A journal smaller than this is never compacted while running."""

COMPACT_RATIO = 4
"""Compact once the journal is this many times larger than its live records."""

_WARN_LINES = 3
"""How many unreadable lines a load names one by one before it only counts them."""


def _no_reply(record: Record) -> bytes:
    return b""


def _put_entry(record: Record) -> dict[str, Any]:
    return {
        "op": "put",
        "rank": record.rank,
        "version": record.version,
        "at": record.registered_at,
        "session_id": record.session_id,
        "weights_info_dict": record.weights_info_dict,
    }


class _Change(NamedTuple):
    entry: dict[str, Any]
    line: bytes
    record: Record | None
    done: asyncio.Future[Record | None]


class JournalStore(MemoryStore):
    """Records in memory, every change journaled to a file and synced before it returns.

    Open one with ``await JournalStore.open(path, encode_reply=...)``; close it
    with ``await store.close()``. ``encode_reply`` builds the ``reply`` of the
    records read back from the file (the registry builds it for new ones).
    """

    def __init__(
        self, file: JournalFile, *, encode_reply: Callable[[Record], bytes], executor: ThreadPoolExecutor
    ) -> None:
        super().__init__()
        self._file = file
        self._encode_reply = encode_reply
        self._executor = executor
        self._live_sizes: dict[int, int] = {}
        """Each live record's line length, and their sum: what a compacted journal would hold."""
        self._live_bytes = 0
        self._pending: list[_Change] = []
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False
        self.skipped = 0
        """How many unreadable lines the load skipped."""

    @property
    def path(self) -> str:
        return str(self._file.path)

    # -- opening and closing -------------------------------------------

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, encode_reply: Callable[[Record], bytes] = _no_reply
    ) -> JournalStore:
        """Load ``path`` (created when missing), compact it, and hold it open for appends.

        Raises :class:`StateFileError` with a one-line detail when the file
        cannot be used; a torn or corrupt line never does.
        """
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aiobootstrap-journal")
        store = cls(JournalFile(path), encode_reply=encode_reply, executor=executor)
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(executor, store._load)
        except BaseException:
            await loop.run_in_executor(executor, store._file.close)
            executor.shutdown(wait=False)
            raise
        return store

    def _load(self) -> None:
        # On the worker thread, before anyone else can see the store.
        entries, problems = self._file.read()
        for entry, size in entries:
            self._apply(entry, size)
        self.skipped = len(problems)
        if problems:
            shown = "; ".join(problems[:_WARN_LINES])
            more = f" and {len(problems) - _WARN_LINES} more" if len(problems) > _WARN_LINES else ""
            log.warning(
                "state file %s: skipped %d unreadable line(s): %s%s; loaded the rest",
                self.path,
                len(problems),
                shown,
                more,
            )
        try:
            self._compact_now()
        except OSError as exc:
            raise StateFileError(f"Cannot use the state file {self.path}: {reason(exc)}.") from None

    async def close(self) -> None:
        """Finish the changes already asked for, then close the file."""
        if self._closed:
            return
        self._closed = True
        if self._flusher is not None:
            await self._flusher
        await asyncio.get_running_loop().run_in_executor(self._executor, self._file.close)
        self._executor.shutdown(wait=False)

    # -- changes -------------------------------------------------------

    async def put(self, record: Record) -> None:
        await self._commit(_put_entry(record), record)

    async def delete(self, rank: int, version: int) -> Record | None:
        return await self._commit({"op": "del", "rank": rank, "version": version})

    def _apply(self, entry: dict[str, Any], size: int, record: Record | None = None) -> Record | None:
        """Make a journaled change visible: the same rules for a live change and a reload.

        ``record`` is the registry's own record for a live put; a reload builds it.
        """
        version: int = entry["version"]
        op = entry["op"]
        self._last_version = max(self._last_version, version)
        if op == "base":
            return None
        rank: int = entry["rank"]
        if op == "put":
            if record is None:
                record = Record(
                    rank, entry["session_id"], entry["weights_info_dict"], version, float(entry["at"])
                )
                record = dataclasses.replace(record, reply=self._encode_reply(record))
            self._keep(record)
            if self._records[rank] is record:
                self._set_live_size(rank, size)
            return None
        current = self._records.get(rank)
        if current is not None and current.version < version:
            del self._records[rank]
            self._set_live_size(rank, 0)
            return current
        return None

    def _set_live_size(self, rank: int, size: int) -> None:
        self._live_bytes += size - self._live_sizes.pop(rank, 0)
        if size:
            self._live_sizes[rank] = size

    # -- group commit --------------------------------------------------

    async def _commit(self, entry: dict[str, Any], record: Record | None = None) -> Record | None:
        if self._closed:
            raise StateFileError("The state file is closed: the server is shutting down.")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Record | None] = loop.create_future()
        self._pending.append(_Change(entry, encode_line(entry), record, done))
        if self._flusher is None:
            self._flusher = loop.create_task(self._flush())
        # Cancelling this wait does not cancel the change: the flusher
        # writes and applies it anyway, so memory always matches the file.
        return await done

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                data = b"".join(change.line for change in batch)
                try:
                    await loop.run_in_executor(self._executor, self._file.append, data)
                except Exception as exc:
                    self._fail(batch, exc)
                    continue
                for change in batch:
                    result = self._apply(change.entry, len(change.line), change.record)
                    if not change.done.done():
                        change.done.set_result(result)
                if self._file.size > max(COMPACT_MIN_BYTES, COMPACT_RATIO * self._live_bytes):
                    await self._compact(loop)
        finally:
            self._flusher = None

    def _fail(self, batch: list[_Change], exc: Exception) -> None:
        # Anything but a disk error would be a bug; the callers must hear either way.
        log.error(
            "state file %s: cannot write %d change(s): %s",
            self.path,
            len(batch),
            exc,
            exc_info=not isinstance(exc, OSError),
        )
        why = reason(exc) if isinstance(exc, OSError) else type(exc).__name__
        for change in batch:
            if not change.done.done():
                change.done.set_exception(
                    StateFileError(
                        f"The server could not save this change to its state file ({why}); "
                        "nothing was changed."
                    )
                )

    # -- compaction ----------------------------------------------------

    async def _compact(self, loop: asyncio.AbstractEventLoop) -> None:
        before = self._file.size
        try:
            await loop.run_in_executor(self._executor, self._compact_now)
        except OSError as exc:
            # The journal itself is intact: appends go on, and a later batch tries again.
            log.warning("state file %s: compaction failed, journal kept as is: %s", self.path, exc)
        else:
            log.info("state file %s: compacted from %d to %d bytes", self.path, before, self._file.size)

    def _compact_now(self) -> None:
        # On the worker thread, while the flusher waits: nothing changes the records meanwhile.
        records = sorted(self._records.values(), key=lambda record: record.rank)
        lines = [encode_line({"op": "base", "version": self._last_version})]
        lines += [encode_line(_put_entry(record)) for record in records]
        self._file.rewrite(lines)
        self._live_sizes = {record.rank: len(line) for record, line in zip(records, lines[1:], strict=True)}
        self._live_bytes = sum(self._live_sizes.values())
