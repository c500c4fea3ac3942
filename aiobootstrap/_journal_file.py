"""The journal file: its format, and the blocking I/O on it.

The file is one magic line, then one line per change, each the CRC-32 of its
JSON in hex and the JSON (``ns`` names the namespace, absent for the default)::

    aiobootstrap-journal 1
    17002112 {"op":"base","version":41}
    d1d56fe8 {"op":"put","rank":3,"version":42,"at":1764460800.5,"session_id":"...","weights_info_dict":{...}}
    0b9f21e4 {"op":"del","rank":3,"version":43}
    5c0f77d2 {"op":"put","ns":"blue","rank":0,"version":44,"at":1764460801.5,"session_id":"...","weights_info_dict":{...}}

The checksum lets a reader tell a line torn by a crash, a flipped bit or
appended garbage from a good line, and skip only the bad one. The JSON is
ASCII (``protocol.dumps``), so no line holds a raw newline.

Nothing here is asynchronous: :class:`~aiobootstrap._journal.JournalStore`
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

from . import _protocol as protocol
from .exceptions import StateFileError

try:
    import fcntl
except ImportError:  # not on this platform: no lock against a second server
    fcntl = None  # type: ignore[assignment]

__all__ = ["MAGIC", "JournalFile", "StateFileError", "encode_line", "parse_line"]

MAGIC = b"aiobootstrap-journal 1\n"


def reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


# -- lines --------------------------------------------------------------


def encode_line(entry: dict[str, Any]) -> bytes:
    body = protocol.dumps(entry)
    return b"%08x %s\n" % (zlib.crc32(body), body)


def parse_line(line: bytes) -> dict[str, Any]:
    """One line's entry (without its newline); ``ValueError`` saying why when it is unreadable."""
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
    if not isinstance(entry.get("ns", ""), str):
        raise ValueError("its namespace is not a string")
    for name in ("version",) if op == "base" else ("rank", "version"):
        if not protocol.is_rank(entry.get(name)):
            raise ValueError(f"its {name} is not a non-negative integer")
    if op == "put":
        if not isinstance(entry.get("session_id"), str) or not isinstance(
            entry.get("weights_info_dict"), dict
        ):
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


class JournalFile:
    """One journal on disk, held open for appends and locked against a second server."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.size = 0
        """Bytes in the file that are known to be whole and synced."""
        self._fd = -1
        self._lock_fd = -1
        self._dirty = False
        """A failed append may have left a partial batch after ``size`` bytes."""

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
            # Refuse someone else's file before leaving anything beside it.
            self._check_magic(self._read(len(MAGIC)))
            self._lock()
            data = self._read()
        except OSError as exc:
            raise self._error(reason(exc)) from None
        self._check_magic(data)
        lines = data[len(MAGIC) :].split(b"\n") if data else []
        torn = lines.pop() if lines else b""  # empty when the file ends with a newline, as whole writes do
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
        """Write whole lines and sync them; on failure, cut the file back to its synced size."""
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
        """Replace the file by ``lines``: side file, sync, rename over, sync the directory."""
        side = self.path.with_name(self.path.name + ".compact")
        fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            with contextlib.suppress(FileNotFoundError):
                # An operator's chmod of the journal outlives its compaction.
                os.fchmod(fd, self.path.stat().st_mode & 0o777)
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
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        self.size = len(data)
        self._dirty = False

    def close(self) -> None:
        for fd in (self._fd, self._lock_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._lock_fd = -1

    def _read(self, size: int = -1) -> bytes:
        try:
            with open(self.path, "rb") as file:
                if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                    raise self._error("it is not a regular file")
                return file.read(size)
        except FileNotFoundError:
            return b""

    def _check_magic(self, data: bytes) -> None:
        if data and not data.startswith(MAGIC):
            # A file that never was a journal: overwriting it would destroy someone's data.
            raise self._error(
                f"it is not an aiobootstrap journal (it does not start with "
                f"{MAGIC.strip().decode()!r}); refusing to overwrite it"
            )

    def _lock(self) -> None:
        self._lock_fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if fcntl is None:
            return
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self._error("another aiobootstrap server holds it") from None

    def _error(self, why: str) -> StateFileError:
        return StateFileError(f"Cannot use the state file {self.path}: {why}.")
