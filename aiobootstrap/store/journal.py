"""The journal file: its format, and the blocking I/O on it.

The file is one magic line, then one line per change, each the CRC-32 of its
JSON in hex and the JSON. ``ns`` names the namespace, ``kind`` and ``role``
the record's kind and role; each is absent for the default (the ``default``
namespace, ``_names.JOURNAL_DEFAULT_KIND``, the ``target`` role)::

    aiobootstrap-journal 1
    17002112 {"op":"base","version":41,"inc":"5f0c..."}
    d1d56fe8 {"op":"put","rank":3,"version":42,"at":1764460800.5,"value":{"session_id":"...","weights_info_dict":{...}}}
    0b9f21e4 {"op":"del","rank":3,"version":43}
    5c0f77d2 {"op":"put","ns":"blue","role":"draft","rank":0,"version":44,"at":1764460801.5,"value":{...}}
    9a1be0c3 {"op":"put","kind":"parallelism_config","rank":0,"version":45,"at":1764460802.5,"value":{"tp_size":8}}
    44e2a7d1 {"op":"put","kind":"encoder_urls","rank":0,"version":46,"at":1764460803.5,"value":{"members":["http://e1"]}}
    7c31d0aa {"op":"put","kind":"metadata","name":"mooncake/ram/node-1","version":47,"at":1764460804.5,"value":{...}}

A named record's line (``Key.named``) has ``name`` in place of ``rank``: a
non-empty string, kept exactly (JSON escapes its newlines and non-ASCII).

Every kind is journaled alike: its value whole (transfer-engine info as the
rank sent it, a tagged backend's fields included). A set record (the encoder
URL list) is journaled as a put of its whole member list after each change.

The ``base`` line, first after a compaction, holds the highest version ever
taken (versions go on above it) and the store's incarnation id. Journals
written before record kinds existed carry their record's two fields
(``_names.JOURNAL_OLD_FIELDS``) beside ``rank`` instead of ``value``; they load as is.

Older versions accepted ranks of any size; a line whose rank is past 18
digits (which no route can read or delete) still parses, and the store skips
it on load, with one warning, and leaves it out of the next compaction.

The checksum lets a reader tell a line torn by a crash, a flipped bit or
appended garbage from a good line, and skip only the bad one. The JSON is
ASCII (``_json.dumps``), so no line holds a raw newline.

Leases add three ops and two put fields, described in ``store.lease_entries``.

Nothing here is asynchronous: :class:`~aiobootstrap.store.file.FileStore`
calls every method from its one worker thread.
"""

from __future__ import annotations

import contextlib
import os
import stat
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import _json
from .._names import JOURNAL_OLD_FIELDS
from .._ranks import is_rank
from ..exceptions import StateFileError
from .lease_entries import LEASE_OPS, check_lease_entry

try:
    import fcntl
except ImportError:  # not on this platform: no lock against a second server
    fcntl = None  # type: ignore[assignment]

__all__ = ["MAGIC", "JournalFile", "JournalMissing", "StateFileError", "encode_line", "parse_line"]

MAGIC = b"aiobootstrap-journal 1\n"


def reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


# -- lines --------------------------------------------------------------


def encode_line(entry: dict[str, Any]) -> bytes:
    body = _json.dumps(entry)
    return b"%08x %s\n" % (zlib.crc32(body), body)


def _check_slot(entry: dict[str, Any]) -> None:
    """``ValueError`` unless a record's line names its rank (an integer from 0) or its name (a non-empty string)."""
    if entry["op"] == "base":
        return
    if "name" in entry:
        name = entry["name"]
        if not isinstance(name, str) or not name or "rank" in entry:
            raise ValueError("its name is not a non-empty string in place of a rank")
        return
    rank = entry.get("rank")
    # A rank past 18 digits, which older versions accepted, still reads here:
    # the store skips it knowingly (see ``store.entries``), keeping its version.
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise ValueError("its rank is not a non-negative integer")


def parse_line(line: bytes) -> dict[str, Any]:
    """One line's entry (without its newline); ``ValueError`` saying why when it is unreadable."""
    crc, _, body = line.partition(b" ")
    if crc != b"%08x" % zlib.crc32(body):
        raise ValueError("its checksum does not match")
    try:
        entry = _json.loads(body)
    except (ValueError, RecursionError):
        raise ValueError("it is not JSON") from None
    if not isinstance(entry, dict):
        raise ValueError("it is not a JSON object")
    op = entry.get("op")
    if op not in ("base", "put", "del", *LEASE_OPS):
        raise ValueError(f"its op {op!r} is unknown")
    for name in ("ns", "kind", "role", "inc"):
        if not isinstance(entry.get(name, ""), str):
            raise ValueError(f"its {name} is not a string")
    if op in LEASE_OPS:
        check_lease_entry(entry)
        if op == "hold":
            try:
                _check_slot(entry)
            except ValueError:
                raise ValueError("it holds no record") from None
        return entry
    if not is_rank(entry.get("version")):
        raise ValueError("its version is not a non-negative integer")
    _check_slot(entry)
    if op == "put":
        text, obj = JOURNAL_OLD_FIELDS
        if "value" not in entry and isinstance(entry.get(text), str):
            # Written before record kinds: the record's two fields stood beside the rank.
            fields = entry.pop(obj, None)
            if not isinstance(fields, dict):
                raise ValueError("it is not a registration")
            entry["value"] = {text: entry.pop(text), obj: fields}
        # Any JSON object a put was given: the store acknowledged it, so it must load.
        if not isinstance(entry.get("value"), dict):
            raise ValueError("it is not a registration")
        at = entry.get("at")
        if not isinstance(at, int | float) or isinstance(at, bool):
            raise ValueError("its time is not a number")
    return entry


# -- the file -----------------------------------------------------------


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


def _sync_directory(directory: Path) -> None:
    # A rename is durable only once the directory entry is.
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _identity(status: os.stat_result) -> tuple[int, int]:
    return status.st_dev, status.st_ino


class JournalMissing(OSError):
    """The journal's path names no file any more (deleted underneath): the state must be written afresh."""


RESERVE_BYTES = 256 * 1024
"""The room a journal keeps beside it for deletions when the disk fills up (see ``release_reserve``)."""


class JournalFile:
    """One journal on disk, held open for appends and locked against a second server.

    The lock is taken on the journal itself (``flock`` on its open file, so
    on its inode): a second server reaching the same file by another path, a
    hard link or a symlink, is refused. A compaction locks the new file before
    it renames it into place, so the lock moves with the journal.

    Before each append the journal checks that its path still names the file
    it holds open: a journal deleted underneath would swallow acknowledged
    writes that no restart finds (:class:`JournalMissing`, which the store
    answers by writing its state afresh), and one replaced by another file is
    refused (:class:`StateFileError`).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.size = 0
        """Bytes in the file that are known to be whole and synced."""
        self._fd = -1
        self._identity: tuple[int, int] | None = None
        self._dirty = False
        """A failed append may have left a partial batch after ``size`` bytes."""
        self._directory_unsynced = False
        """A compaction renamed a new file into place but could not sync the directory yet."""

    @property
    def reserve_path(self) -> Path:
        return self.path.with_name(self.path.name + ".reserve")

    def read(self) -> tuple[list[tuple[dict[str, Any], int]], list[str]]:
        """Lock the file and read it: each good line's entry and length, and why each bad line is bad.

        A missing file is an empty journal. Raises :class:`StateFileError`
        when the file cannot be used at all; a bad line never does.
        """
        # Compaction renames over the file: through a symlink, rename its target.
        self.path = Path(os.path.realpath(self.path))
        try:
            if not self.path.parent.is_dir():
                raise self._error(f"its directory {self.path.parent} does not exist")
            self._open_locked()
            data = self._read_all()
        except OSError as exc:
            raise self._error(reason(exc)) from None
        self._check_magic(data)
        lines = data[len(MAGIC) :].split(b"\n") if data else []
        torn = lines.pop() if lines else b""  # empty when the file ends with a newline, as whole writes do
        # What follows the last whole line (or a magic line cut short) is cut before the first append.
        self.size = len(data) - len(torn) if len(data) >= len(MAGIC) else 0
        self._dirty = self.size < len(data)
        entries: list[tuple[dict[str, Any], int]] = []
        problems: list[str] = []
        for number, line in enumerate(lines, start=2):
            try:
                entries.append((parse_line(line), len(line) + 1))
            except ValueError as exc:
                problems.append(f"line {number} ({exc})")
        if torn:
            problems.append(f"line {len(lines) + 2} (it is cut short, {len(torn)} bytes)")
        return entries, problems

    def append(self, data: bytes) -> None:
        """Write whole lines and sync them; on failure, cut the file back to its synced size.

        Raises :class:`JournalMissing` when the path names no file any more,
        and :class:`StateFileError` when it names another one; nothing is
        written then.
        """
        self._check_path()
        if self.size == 0:
            data = MAGIC + data
        if self._dirty:
            # A partial batch glued to this one would corrupt its first line.
            os.ftruncate(self._fd, self.size)
            self._dirty = False
        try:
            _write_all(self._fd, data)
            _sync(self._fd)
        except OSError:
            self._dirty = True
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self.size)
                self._dirty = False
            raise
        self.size += len(data)

    def rewrite(self, lines: Iterable[bytes]) -> None:
        """Replace the file by ``lines``: side file, sync, lock, rename over, sync the directory.

        The journal goes on in the new file from the moment of the rename,
        whatever fails after it: appending to the old file, which no path
        names any more, would lose every later write at the next start.
        """
        side = self.path.with_name(self.path.name + ".compact")
        fd = os.open(side, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        data = MAGIC + b"".join(lines)
        try:
            with contextlib.suppress(FileNotFoundError):
                # An operator's chmod of the journal outlives its compaction.
                os.fchmod(fd, self.path.stat().st_mode & 0o777)
            _write_all(fd, data)
            _sync(fd)
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.replace(side, self.path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                side.unlink()
            raise
        old, self._fd = self._fd, fd
        self._identity = _identity(os.fstat(fd))
        self.size = len(data)
        self._dirty = False
        if old >= 0:
            os.close(old)
        self._directory_unsynced = True
        self._sync_directory()

    def keep_reserve(self) -> None:
        """Make sure the reserve beside the journal exists; quietly do without on a full disk."""
        reserve = self.reserve_path
        if reserve.exists():
            return
        try:
            fd = os.open(reserve, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except OSError:
            return
        try:
            _write_all(fd, bytes(RESERVE_BYTES))
            _sync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                reserve.unlink()
        finally:
            os.close(fd)

    def release_reserve(self) -> bool:
        """Free the reserve, so deletions can be written on a full disk; whether there was one."""
        try:
            self.reserve_path.unlink()
        except OSError:
            return False
        return True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = -1

    def _open_locked(self) -> None:
        for _ in range(10):
            try:
                # O_NONBLOCK: a FIFO at the path must be refused, not waited on for a writer.
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC)
            except FileNotFoundError:
                fd = os.open(
                    self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644
                )
            try:
                status = os.fstat(fd)
                if not stat.S_ISREG(status.st_mode):
                    raise self._error("it is not a regular file")
                # Refuse someone else's file before locking or changing anything.
                self._check_magic(os.pread(fd, len(MAGIC), 0))
                if fcntl is not None:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        raise self._error("another aiobootstrap server holds it") from None
                # The server that held it may have compacted it between our open
                # and our lock: then the lock is on a file no path names.
                if _identity(os.stat(self.path)) != _identity(status):
                    os.close(fd)
                    continue
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            self._identity = _identity(status)
            return
        raise self._error("another process keeps replacing it")

    def _read_all(self) -> bytes:
        chunks = []
        offset = 0
        while chunk := os.pread(self._fd, 1 << 20, offset):
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks)

    def _check_path(self) -> None:
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            raise JournalMissing(f"the state file {self.path} was deleted") from None
        if _identity(status) != self._identity:
            raise self._error(
                "another file took its place while the server ran; move it away and restart the server"
            )
        if self._directory_unsynced:
            self._sync_directory()

    def _sync_directory(self) -> None:
        _sync_directory(self.path.parent)
        self._directory_unsynced = False

    def _check_magic(self, data: bytes) -> None:
        if data and not MAGIC.startswith(data[: len(MAGIC)]):
            # A file that never was a journal: overwriting it would destroy someone's data.
            raise self._error(
                f"it is not an aiobootstrap journal (it does not start with "
                f"{MAGIC.strip().decode()!r}); refusing to overwrite it"
            )

    def _error(self, why: str) -> StateFileError:
        return StateFileError(f"Cannot use the state file {self.path}: {why}.")
