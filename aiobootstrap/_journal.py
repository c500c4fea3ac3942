"""A durable record store: an append-only journal file, fsync'd before any ack.

Theory of operation
-------------------
The store keeps every record in memory, as :class:`MemoryStore` does, and
writes each change to a journal file first: a ``put`` or ``delete`` returns
only after its line is on disk (``fdatasync``), and only then does the change
show in memory, so nothing a reader or waiter ever saw can be lost by a crash.

The file is one magic line, then one line per change::

    aiobootstrap-journal 1
    3e5a0b1c {"op":"base","version":41}
    5c0f77d2 {"op":"put","rank":3,"version":42,"at":1764460800.5,"session_id":"...","weights_info_dict":{...}}
    0b9f21e4 {"op":"del","rank":3,"version":43}

Each line carries the CRC-32 of its JSON, so a line torn by a crash, a bit
flipped on disk or garbage appended by hand is recognised and skipped with a
warning when the file is read; every other line still loads. A higher version
wins, as in the registry, so the order of the lines matters only for a put
and a delete of one rank.

Group commit: changes queue up while the worker thread writes and syncs the
previous batch, and the next batch takes everything queued in one write and
one sync. A storm of registrations therefore pays one sync per batch, not one
per registration, and never waits behind more than one sync in progress. All
file I/O happens on the store's one worker thread, so the event loop never
blocks on the disk and the writes keep their order.

Compaction: on open, and whenever the file has grown to several times what
its live records need, the store writes the live records to a side file,
syncs it, renames it over the journal and syncs the directory, so the journal
is always either the old file or the new one, never a mix.

A lock on ``PATH.lock`` keeps a second server from writing the same journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import stat
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from . import _protocol as protocol
from ._registry import MemoryStore, Record
from .exceptions import ServerUnavailable

try:
    import fcntl
except ImportError:  # not on this platform: no lock against a second server
    fcntl = None  # type: ignore[assignment]

__all__ = ["JournalStore", "StateFileError"]

log = logging.getLogger("aiobootstrap")

MAGIC = b"aiobootstrap-journal 1\n"

COMPACT_MIN_BYTES = 1 << 20
"""A journal smaller than this is never compacted while running."""

COMPACT_RATIO = 4
"""Compact once the journal is this many times larger than its live records."""

_WARN_LINES = 3
"""How many unreadable lines a load names one by one before it only counts them."""


class StateFileError(ServerUnavailable):
    """The state file cannot be read or written (HTTP 503 when a registration meets it)."""


def _no_reply(record: Record) -> bytes:
    return b""


def _sync(fd: int) -> None:
    # fdatasync skips the inode times an append does not need; F_FULLFSYNC is
    # what reaches the platter on macOS, where fsync stops at the drive cache.
    if hasattr(fcntl, "F_FULLFSYNC"):
        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    elif hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _line(entry: dict[str, Any]) -> bytes:
    body = protocol.dumps(entry)
    return b"%08x %s\n" % (zlib.crc32(body), body)


def _put_entry(record: Record) -> dict[str, Any]:
    return {
        "op": "put",
        "rank": record.rank,
        "version": record.version,
        "at": record.registered_at,
        "session_id": record.session_id,
        "weights_info_dict": record.weights_info_dict,
    }


def _parse_line(line: bytes) -> dict[str, Any]:
    """One journal line's entry; ``ValueError`` saying why when it is unreadable."""
    crc, _, body = line.partition(b" ")
    if crc != b"%08x" % zlib.crc32(body):
        raise ValueError("its checksum does not match")
    try:
        entry = protocol.loads(body)
    except (ValueError, RecursionError):
        raise ValueError("it is not JSON") from None
    if not isinstance(entry, dict):
        raise ValueError("it is not a JSON object")
    op = entry.get("op")
    if op not in ("base", "put", "del"):
        raise ValueError(f"its op {op!r} is unknown")
    for field in ("version",) if op == "base" else ("rank", "version"):
        if not protocol.is_rank(entry.get(field)):
            raise ValueError(f"its {field} is not a non-negative integer")
    if op == "put":
        at = entry.get("at")
        if not isinstance(entry.get("session_id"), str) or not isinstance(
            entry.get("weights_info_dict"), dict
        ):
            raise ValueError("it is not a registration")
        if not isinstance(at, int | float) or isinstance(at, bool):
            raise ValueError("its time is not a number")
    return entry


class _Change(NamedTuple):
    entry: dict[str, Any]
    line: bytes
    record: Record | None
    done: asyncio.Future[Record | None]


class JournalStore(MemoryStore):
    """Records in memory, every change journaled to ``path`` and synced before it returns.

    Open one with ``await JournalStore.open(path, encode_reply=...)``; close it
    with ``await store.close()``. ``encode_reply`` builds the ``reply`` of the
    records read back from the file (the registry builds it for new ones).
    """

    def __init__(
        self,
        path: Path,
        *,
        encode_reply: Callable[[Record], bytes],
        executor: ThreadPoolExecutor,
    ) -> None:
        super().__init__()
        self.path = path
        self._encode_reply = encode_reply
        self._executor = executor
        self._fd = -1
        self._lock_fd = -1
        self._size = 0
        """Bytes in the journal file."""
        self._live_sizes: dict[int, int] = {}
        """Each live record's line length, and their sum: what a compacted journal would hold."""
        self._live_bytes = 0
        self._pending: list[_Change] = []
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False
        self.skipped = 0
        """How many unreadable lines the last load skipped."""

    # -- opening -------------------------------------------------------

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, encode_reply: Callable[[Record], bytes] = _no_reply
    ) -> JournalStore:
        """Load ``path`` (created when missing), compact it, and keep it open for appends.

        Raises :class:`StateFileError` with a one-line detail when the file
        cannot be used; a torn or corrupt line never does.
        """
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aiobootstrap-journal")
        store = cls(Path(path), encode_reply=encode_reply, executor=executor)
        try:
            await asyncio.get_running_loop().run_in_executor(executor, store._open_file)
        except BaseException:
            await asyncio.get_running_loop().run_in_executor(executor, store._close_files)
            executor.shutdown(wait=False)
            raise
        return store

    def _open_file(self) -> None:
        # Compaction renames over the file: through a symlink, rename its target.
        self.path = Path(os.path.realpath(self.path))
        try:
            if not self.path.parent.is_dir():
                raise StateFileError(
                    f"Cannot use the state file {self.path}: its directory {self.path.parent} does not exist."
                )
            # Refuse someone else's file before leaving anything beside it.
            self._check_journal(self._read(len(MAGIC)))
            self._lock()
            self._load(self._read())
            self._rewrite()
        except OSError as exc:
            raise StateFileError(f"Cannot use the state file {self.path}: {_reason(exc)}.") from None

    def _read(self, size: int = -1) -> bytes:
        try:
            with open(self.path, "rb") as file:
                if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                    raise StateFileError(f"Cannot use the state file {self.path}: it is not a regular file.")
                return file.read(size)
        except FileNotFoundError:
            return b""

    def _check_journal(self, data: bytes) -> None:
        if data and not data.startswith(MAGIC):
            # A file that never was a journal: overwriting it would destroy someone's data.
            raise StateFileError(
                f"Cannot use the state file {self.path}: it is not an aiobootstrap journal "
                f"(it does not start with {MAGIC.strip().decode()!r}); refusing to overwrite it."
            )

    def _lock(self) -> None:
        self._lock_fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if fcntl is None:
            return
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateFileError(
                f"Cannot use the state file {self.path}: another aiobootstrap server holds it."
            ) from None

    def _load(self, data: bytes) -> None:
        self._check_journal(data)
        if not data:
            return
        lines = data[len(MAGIC) :].split(b"\n")
        torn = lines.pop()  # empty when the file ends with a newline, as every whole write does
        problems: list[str] = []
        for number, line in enumerate(lines, start=2):
            try:
                entry = _parse_line(line)
            except ValueError as exc:
                problems.append(f"line {number} ({exc})")
                continue
            self._apply(entry, len(line) + 1)
        if torn:
            problems.append(f"line {len(lines) + 2} (it is cut short, {len(torn)} bytes)")
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

    # -- the records ---------------------------------------------------

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

    async def put(self, record: Record) -> None:
        await self._commit(_put_entry(record), record)

    async def delete(self, rank: int, version: int) -> Record | None:
        return await self._commit({"op": "del", "rank": rank, "version": version})

    async def close(self) -> None:
        """Finish the changes already asked for, then close the file."""
        if self._closed:
            return
        self._closed = True
        if self._flusher is not None:
            await self._flusher
        await asyncio.get_running_loop().run_in_executor(self._executor, self._close_files)
        self._executor.shutdown(wait=False)

    # -- group commit --------------------------------------------------

    async def _commit(self, entry: dict[str, Any], record: Record | None = None) -> Record | None:
        if self._closed:
            raise StateFileError("The state file is closed: the server is shutting down.")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Record | None] = loop.create_future()
        # Encoded here, not on the worker thread: there it would hold the GIL
        # against the event loop, while the thread's write and sync release it.
        self._pending.append(_Change(entry, _line(entry), record, done))
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
                    await loop.run_in_executor(self._executor, self._append, data)
                except Exception as exc:
                    # Anything but a disk error would be a bug; the callers must hear either way.
                    log.error(
                        "state file %s: cannot write %d change(s): %s",
                        self.path,
                        len(batch),
                        exc,
                        exc_info=not isinstance(exc, OSError),
                    )
                    reason = _reason(exc) if isinstance(exc, OSError) else type(exc).__name__
                    for change in batch:
                        if not change.done.done():
                            change.done.set_exception(
                                StateFileError(
                                    f"The server could not save this change to its state file "
                                    f"({reason}); nothing was changed."
                                )
                            )
                    continue
                for change in batch:
                    result = self._apply(change.entry, len(change.line), change.record)
                    if not change.done.done():
                        change.done.set_result(result)
                if self._size > max(COMPACT_MIN_BYTES, COMPACT_RATIO * self._live_bytes):
                    await self._compact(loop)
        finally:
            self._flusher = None

    async def _compact(self, loop: asyncio.AbstractEventLoop) -> None:
        before = self._size
        try:
            await loop.run_in_executor(self._executor, self._rewrite)
        except OSError as exc:
            # The journal itself is intact: appends go on, and the next batch tries again.
            log.warning("state file %s: compaction failed, journal kept as is: %s", self.path, exc)
        else:
            log.info("state file %s: compacted from %d to %d bytes", self.path, before, self._size)

    # -- the worker thread ---------------------------------------------

    def _append(self, data: bytes) -> None:
        """Write and sync one batch; on failure cut the file back to its last synced size."""
        try:
            _write_all(self._fd, data)
            _sync(self._fd)
        except OSError:
            # A half-written batch would glue onto the next one; the journal's
            # synced prefix is what its acknowledged changes need.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
                _sync(self._fd)
            raise
        self._size += len(data)

    def _rewrite(self) -> None:
        """Replace the journal with its live records: side file, sync, rename, sync the directory."""
        records = sorted(self._records.values(), key=lambda record: record.rank)
        side = self.path.with_name(self.path.name + ".compact")
        fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            with contextlib.suppress(FileNotFoundError):
                # An operator's chmod of the journal outlives its compaction.
                os.fchmod(fd, self.path.stat().st_mode & 0o777)
            lines = [_line({"op": "base", "version": self._last_version})]
            lines += [_line(_put_entry(record)) for record in records]
            data = MAGIC + b"".join(lines)
            _write_all(fd, data)
            _sync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                side.unlink()
            raise
        os.close(fd)
        os.replace(side, self.path)
        _sync_directory(self.path.parent)
        self._reopen()
        self._size = len(data)
        self._live_sizes = {record.rank: len(line) for record, line in zip(records, lines[1:], strict=True)}
        self._live_bytes = sum(self._live_sizes.values())

    def _reopen(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd

    def _close_files(self) -> None:
        for fd in (self._fd, self._lock_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._lock_fd = -1


def _sync_directory(directory: Path) -> None:
    # The rename is durable only once the directory entry is.
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)
