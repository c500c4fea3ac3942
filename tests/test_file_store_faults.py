"""The file store on a bad day: its file deleted, replaced, linked, a FIFO, a full disk, a failing compaction.

Each of these once made the server acknowledge writes that a restart would not
find, hang, or share its journal with a second server.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import sys
from pathlib import Path

import pytest

from aiobootstrap.store import file as file_store
from aiobootstrap.store import journal
from aiobootstrap.store.file import FileStore, StateFileError
from aiobootstrap.store.interface import ignore_changes
from aiobootstrap.wire.bodies import session_id_of

from .helpers.cli import launch
from .helpers.file_store import open_file, reopened
from .helpers.registry import info_key
from .helpers.stores import info
from .helpers.waits import GUARD


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state.journal"


def _full_disk() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# Tiny file chores, kept out of the async tests (ruff's ASYNC240).


def inode(path: Path) -> int:
    return path.stat().st_ino


def replace_with(path: Path, replacement: str | None) -> None:
    """Delete ``path``, then put a directory or another file there (or nothing)."""
    path.unlink()
    if replacement == "directory":
        path.mkdir()
    elif replacement == "file":
        path.write_bytes(b"someone else's file\n")


def exists(path: Path) -> bool:
    return path.exists()


def file_size(path: Path) -> int:
    return path.stat().st_size


def names_beside(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


def reserve_of(path: Path) -> Path:
    return path.with_name(path.name + ".reserve")


# -- what the path names ------------------------------------------------


async def test_a_fifo_is_refused_at_once(path: Path) -> None:
    """A FIFO as the state file is refused before anything waits on it for a writer."""
    os.mkfifo(path)
    with pytest.raises(StateFileError, match="not a regular file"):
        await asyncio.wait_for(open_file(path), GUARD)


def test_the_cli_refuses_a_fifo_in_one_line(path: Path) -> None:
    """python -m aiobootstrap --state-file FIFO exits 1 with one line instead of hanging."""
    os.mkfifo(path)
    process = launch("--port", "0", "--state-file", str(path))
    out, err = process.communicate(timeout=GUARD)
    assert process.returncode == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "not a regular file" in lines[0]


@pytest.mark.parametrize("link", [os.link, os.symlink])
async def test_a_second_store_through_another_path_to_the_same_file_is_refused(
    path: Path, link: object
) -> None:
    """The lock is on the journal itself: a hard link or a symlink to it is the same journal, refused."""
    first = await open_file(path)
    other = path.with_name("other.journal")
    link(path, other)  # type: ignore[operator]
    with pytest.raises(StateFileError, match="another aiobootstrap server holds it"):
        await open_file(other)
    await first.close()


async def test_the_lock_moves_with_the_journal_when_it_is_compacted(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a compaction put a new file at the path, a second store is still refused."""
    monkeypatch.setattr(file_store, "COMPACT_MIN_BYTES", 2000)
    first = await open_file(path)
    before = inode(path)
    for round_ in range(100):
        await first.put(info_key(0), info(f"round {round_}", {"pad": "x" * 50}))
    assert inode(path) != before
    with pytest.raises(StateFileError, match="another aiobootstrap server holds it"):
        await open_file(path)
    await first.close()


async def test_a_journal_deleted_underneath_is_written_afresh(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After rm of the journal, the next registration writes the whole state at the path: a restart has it all."""
    store = await open_file(path)
    await store.put(info_key(0), info("before"))
    replace_with(path, None)
    await store.put(info_key(1), info("after"))
    await store.close()
    assert exists(path)
    assert {rank: session_id_of(record.value) for rank, record in (await reopened(path)).items()} == {
        0: "before",
        1: "after",
    }
    assert "deleted while the server ran" in caplog.text


@pytest.mark.parametrize("replacement", ["directory", "file"])
async def test_a_journal_replaced_underneath_refuses_writes(path: Path, replacement: str) -> None:
    """After rm plus mkdir (or another file) at the path, writes are refused (503), never acknowledged."""
    store = await open_file(path)
    await store.put(info_key(0), info("before"))
    replace_with(path, replacement)
    with pytest.raises(StateFileError, match="another file took its place") as refused:
        await store.put(info_key(1), info("lost"))
    assert refused.value.status == 503
    assert await store.get(info_key(1)) is None
    await store.close()


# -- compaction ---------------------------------------------------------


async def test_a_compaction_that_fails_after_its_rename_keeps_writing_to_the_new_file(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory sync failing after the rename leaves the journal on the renamed file: later writes survive."""
    monkeypatch.setattr(file_store, "COMPACT_MIN_BYTES", 2000)
    real_sync_directory = journal._sync_directory
    failures = 0

    def failing_once(directory: Path) -> None:
        nonlocal failures
        if failures == 0:
            failures += 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_sync_directory(directory)

    store = await open_file(path)
    monkeypatch.setattr(journal, "_sync_directory", failing_once)
    for round_ in range(100):
        await store.put(info_key(0), info(f"round {round_}", {"pad": "x" * 50}))
    await store.put(info_key(1), info("after the failed compaction"))
    await store.close()
    assert failures == 1
    read_back = await reopened(path)
    assert session_id_of(read_back[0].value) == "round 99"
    assert session_id_of(read_back[1].value) == "after the failed compaction"


# -- a full disk --------------------------------------------------------


async def test_a_server_starts_on_an_intact_journal_when_the_disk_is_full(
    path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The compaction at start needs room; without it the journal is served as it is."""
    first = await open_file(path)
    await first.put(info_key(0), info("kept"))
    await first.close()

    def no_room(self: journal.JournalFile, lines: object) -> None:
        raise _full_disk()

    monkeypatch.setattr(journal.JournalFile, "rewrite", no_room)
    store = await open_file(path)
    assert (await store.get(info_key(0))) is not None
    await store.close()
    assert "cannot compact it at start" in caplog.text


async def test_deletions_free_space_on_a_full_disk(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a full disk a registration is refused (503) but a deletion is written, in the reserve's room."""
    store = await open_file(path)
    await store.put(info_key(0), info("to delete"))
    await store.put(info_key(1), info("kept"))
    reserve = reserve_of(path)
    assert exists(reserve)
    real_write_all = journal._write_all

    def full_until_the_reserve_goes(fd: int, data: bytes) -> None:
        if exists(reserve):
            raise _full_disk()
        real_write_all(fd, data)

    monkeypatch.setattr(journal, "_write_all", full_until_the_reserve_goes)
    with pytest.raises(StateFileError, match="No space left on device"):
        await store.put(info_key(2), info("refused"))
    assert await store.delete(info_key(0)) is not None
    assert not exists(reserve)
    await store.close()
    monkeypatch.setattr(journal, "_write_all", real_write_all)
    assert sorted(await reopened(path)) == [1]


async def test_a_full_disk_logs_one_error_not_one_per_write(
    path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Fifty refused writes make one ERROR line; the recovery is said once."""
    store = await open_file(path)
    real_write_all = journal._write_all

    def full(fd: int, data: bytes) -> None:
        raise _full_disk()

    monkeypatch.setattr(journal, "_write_all", full)
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        for rank in range(50):
            with pytest.raises(StateFileError):
                await store.put(info_key(rank), info())
        monkeypatch.setattr(journal, "_write_all", real_write_all)
        await store.put(info_key(0), info())
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "writes succeed again (49 more change(s) failed meanwhile)" in caplog.text
    await store.close()


@pytest.mark.skipif(sys.platform != "linux", reason="the reserve's size is checked on Linux only")
async def test_the_reserve_is_made_beside_the_journal(path: Path) -> None:
    """A store keeps a reserve file beside its journal, for deletions on a full disk."""
    store = await open_file(path)
    assert file_size(reserve_of(path)) == journal.RESERVE_BYTES
    await store.close()


async def test_closing_leaves_no_side_files(path: Path) -> None:
    """A store leaves only its journal and its reserve behind."""
    store = FileStore(str(path))
    await store.open(ignore_changes())
    await store.put(info_key(0), info())
    await store.close()
    assert names_beside(path) == ["state.journal", "state.journal.reserve"]
