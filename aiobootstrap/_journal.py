"""Durable record stores: every change journaled and synced before it returns.

Theory of operation
-------------------
A :class:`Journal` is one file shared by the stores of every namespace. Each
:class:`JournalStore` keeps its namespace's records in memory, as
:class:`MemoryStore` does, and hands each change to the journal first: a
``put`` or ``delete`` returns only after its line is on disk, and only then
does the change show in memory, so nothing a reader or a waiter ever saw can
be lost by a crash. Reloading replays the lines with the rules a live change
follows (:meth:`JournalStore._apply`): a put replaces an older version of its
rank, a delete removes an older one. After a reload every namespace's
versions continue above the highest version in the file, so no version is
ever handed out twice, even by a namespace that was forgotten meanwhile.

Group commit: changes queue up while the worker thread writes and syncs the
previous batch, and the next batch takes everything queued, in one write and
one sync. A storm of registrations pays one sync per batch, not one per
registration, and none waits behind more than one sync in progress. All file
I/O happens on the journal's one worker thread, so the event loop never
blocks on the disk and the writes keep their order; lines are encoded on the
loop, because on the worker thread the encoding would hold the GIL against
the loop while the write and the sync release it.

Compaction: on open, and whenever the file has grown to several times what
the live records need, the journal rewrites it to just the live records,
atomically (side file, sync, rename, sync the directory; see ``_journal_file``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from ._journal_file import JournalFile, StateFileError, encode_line, reason
from ._protocol import DEFAULT_NAMESPACE
from ._registry import MemoryStore, Record

__all__ = ["Journal", "JournalStore", "StateFileError"]

log = logging.getLogger("aiobootstrap")

COMPACT_MIN_BYTES = 1 << 20
"""A journal smaller than this is never compacted while running."""

COMPACT_RATIO = 4
"""Compact once the journal is this many times larger than its live records."""

_WARN_LINES = 3
"""How many unreadable lines a load names one by one before it only counts them."""


def _no_reply(record: Record) -> bytes:
    return b""


def _put_entry(namespace: str, record: Record) -> dict[str, Any]:
    entry: dict[str, Any] = {"op": "put"}
    if namespace != DEFAULT_NAMESPACE:
        entry["ns"] = namespace
    entry.update(
        rank=record.rank,
        version=record.version,
        at=record.registered_at,
        session_id=record.session_id,
        weights_info_dict=record.weights_info_dict,
    )
    return entry


class _Change(NamedTuple):
    store: JournalStore
    entry: dict[str, Any]
    line: bytes
    record: Record | None
    done: asyncio.Future[Record | None]


class JournalStore(MemoryStore):
    """One namespace's records, every change journaled and synced before it returns.

    Made by :meth:`Journal.store`; the journal closes it.
    """

    def __init__(self, journal: Journal, namespace: str, last_version: int = 0) -> None:
        super().__init__(last_version=last_version)
        self.namespace = namespace
        self.journal = journal
        self._live_bytes: dict[int, int] = {}
        """Each live record's line length: what a compacted journal holds for it."""

    async def put(self, record: Record) -> None:
        await self.journal._commit(self, _put_entry(self.namespace, record), record)

    async def delete(self, rank: int, version: int) -> Record | None:
        entry: dict[str, Any] = {"op": "del", "rank": rank, "version": version}
        if self.namespace != DEFAULT_NAMESPACE:
            entry["ns"] = self.namespace
        return await self.journal._commit(self, entry, None)

    async def close(self) -> None:
        """Nothing to do: the journal, shared by every namespace, closes the file."""

    def _apply(self, entry: dict[str, Any], size: int, record: Record | None = None) -> Record | None:
        """Make a journaled change visible: the same rules for a live change and a reload.

        ``record`` is the registry's own record for a live put; a reload builds it.
        """
        version: int = entry["version"]
        rank: int = entry["rank"]
        if entry["op"] == "put":
            if record is None:
                record = Record(
                    rank, entry["session_id"], entry["weights_info_dict"], version, float(entry["at"])
                )
                record = dataclasses.replace(record, reply=self.journal.encode_reply(record))
            self._keep(record)
            if self._records[rank] is record:
                self.journal.live_bytes += size - self._live_bytes.get(rank, 0)
                self._live_bytes[rank] = size
            self.journal._noted(self, version)
            return None
        self._last_version = max(self._last_version, version)
        current = self._records.get(rank)
        if current is not None and current.version < version:
            del self._records[rank]
            self.journal.live_bytes -= self._live_bytes.pop(rank, 0)
        else:
            current = None
        self.journal._noted(self, version)
        return current


class Journal:
    """The journal file behind every namespace's :class:`JournalStore`.

    Open with ``await Journal.open(path, encode_reply=...)``, get each
    namespace's store with :meth:`store`, and ``await journal.close()`` at the
    end. ``encode_reply`` builds the ``reply`` of the records read back from
    the file (the registry builds it for new ones).
    """

    def __init__(self, file: JournalFile, encode_reply: Callable[[Record], bytes]) -> None:
        self.encode_reply = encode_reply
        self.live_bytes = 0
        """Bytes the live records' lines take: what a compacted journal holds."""
        self.skipped = 0
        """How many unreadable lines the load skipped."""
        self._file = file
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aiobootstrap-journal")
        # A namespace's store lives as long as its registry uses it or it holds
        # records: names come from clients, and forgotten ones must not pile up.
        self._stores: weakref.WeakValueDictionary[str, JournalStore] = weakref.WeakValueDictionary()
        self._holding: dict[str, JournalStore] = {}
        self._high = 0
        """The highest version read or written in any namespace: new stores go on above it."""
        self._pending: list[_Change] = []
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def path(self) -> str:
        return str(self._file.path)

    @property
    def last_version(self) -> int:
        """The highest version of any namespace, read or written."""
        return self._high

    def __len__(self) -> int:
        """How many records the journal holds, in every namespace."""
        return sum(len(store) for store in self._holding.values())

    def store(self, namespace: str = DEFAULT_NAMESPACE, last_version: int = 0) -> JournalStore:
        """The store of ``namespace``, with what the file holds for it.

        A new store's versions go on above ``last_version`` and above every
        version the journal has seen, in any namespace.
        """
        store = self._stores.get(namespace)
        if store is None:
            store = self._stores[namespace] = JournalStore(self, namespace, self._high)
        store._last_version = max(store.last_version, last_version)
        return store

    def _noted(self, store: JournalStore, version: int) -> None:
        self._high = max(self._high, version)
        if len(store):
            self._holding[store.namespace] = store
        else:
            self._holding.pop(store.namespace, None)

    # -- opening and closing -------------------------------------------

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, encode_reply: Callable[[Record], bytes] = _no_reply
    ) -> Journal:
        """Load ``path`` (created when missing), compact it, and hold it open for appends.

        Raises :class:`StateFileError` with a one-line detail when the file
        cannot be used; a torn or corrupt line never does.
        """
        journal = cls(JournalFile(path), encode_reply)
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(journal._executor, journal._load)
        except BaseException:
            await loop.run_in_executor(journal._executor, journal._file.close)
            journal._executor.shutdown(wait=False)
            raise
        return journal

    def _load(self) -> None:
        # On the worker thread, before anyone else can see the journal.
        entries, problems = self._file.read()
        for entry, size in entries:
            self._high = max(self._high, entry["version"])
            if entry["op"] != "base":
                self.store(entry.get("ns", DEFAULT_NAMESPACE))._apply(entry, size)
        # A deletion compacted away survives only in the base line: go on above everything.
        for store in self._holding.values():
            store._last_version = self._high
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
        snapshot = self._snapshot()
        try:
            self._resize(snapshot, self._rewrite(snapshot))
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

    # -- group commit --------------------------------------------------

    async def _commit(
        self, store: JournalStore, entry: dict[str, Any], record: Record | None
    ) -> Record | None:
        if self._closed:
            raise StateFileError("The state file is closed: the server is shutting down.")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Record | None] = loop.create_future()
        self._pending.append(_Change(store, entry, encode_line(entry), record, done))
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
                    result = change.store._apply(change.entry, len(change.line), change.record)
                    if not change.done.done():
                        change.done.set_result(result)
                if self._file.size > max(COMPACT_MIN_BYTES, COMPACT_RATIO * self.live_bytes):
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
        snapshot = self._snapshot()
        try:
            sizes = await loop.run_in_executor(self._executor, self._rewrite, snapshot)
        except OSError as exc:
            # The journal itself is intact: appends go on, and a later batch tries again.
            log.warning("state file %s: compaction failed, journal kept as is: %s", self.path, exc)
            return
        self._resize(snapshot, sizes)
        log.info("state file %s: compacted from %d to %d bytes", self.path, before, self._file.size)

    def _snapshot(self) -> list[tuple[JournalStore, list[Record]]]:
        # Taken on the loop, while the flusher waits: no change lands until the rewrite is done.
        return [
            (store, sorted(store, key=lambda record: record.rank)) for store in list(self._holding.values())
        ]

    def _rewrite(self, snapshot: list[tuple[JournalStore, list[Record]]]) -> list[list[int]]:
        """On the worker thread: the file becomes the snapshot; each record's line length."""
        lines = [encode_line({"op": "base", "version": self._high})]
        sizes: list[list[int]] = []
        for store, records in snapshot:
            store_lines = [encode_line(_put_entry(store.namespace, record)) for record in records]
            lines += store_lines
            sizes.append([len(line) for line in store_lines])
        self._file.rewrite(lines)
        return sizes

    def _resize(self, snapshot: list[tuple[JournalStore, list[Record]]], sizes: list[list[int]]) -> None:
        self.live_bytes = 0
        for (store, records), lengths in zip(snapshot, sizes, strict=True):
            store._live_bytes = {record.rank: size for record, size in zip(records, lengths, strict=True)}
            self.live_bytes += sum(lengths)
