"""The journal store: what it acknowledges survives a reopen, and a damaged file never stops it."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiobootstrap import Record, Registry, ServerUnavailable
from aiobootstrap import _journal as journal
from aiobootstrap import _journal_file as journal_file
from aiobootstrap._journal import Journal, JournalStore, StateFileError
from aiobootstrap._namespaces import Namespaces
from aiobootstrap._protocol import encode_info

from .conftest import GUARD, until


async def open_store(path: Path, namespace: str = "default") -> JournalStore:
    """The store of ``namespace`` in the journal at ``path``; ``store.journal.close()`` closes both."""
    journal = await Journal.open(path, encode_reply=encode_info)
    return journal.store(namespace)


async def open_registry(path: Path) -> tuple[Registry, JournalStore]:
    store = await open_store(path)
    return Registry(store, encode_reply=encode_info), store


async def reopened(path: Path) -> dict[int, Record]:
    """The records a fresh store reads back from ``path``."""
    store = await open_store(path)
    try:
        return {record.rank: record for record in store}
    finally:
        await store.journal.close()


async def fill(path: Path, count: int = 3) -> list[Record]:
    """Register ranks ``0..count-1`` through a registry on ``path``, then close it."""
    registry, store = await open_registry(path)
    records = [await registry.register(rank, f"s{rank}", {"w": [rank]}) for rank in range(count)]
    await store.journal.close()
    return records


# Tiny file chores, kept out of the async tests (ruff's ASYNC240): the files are a few KiB.


def read(path: Path) -> bytes:
    return path.read_bytes()


def write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as file:
        file.write(data)


def journal_lines(path: Path) -> list[bytes]:
    return read(path).split(b"\n")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state.journal"


Gate = tuple[threading.Event, threading.Event]


@pytest.fixture
def hold_syncs(monkeypatch: pytest.MonkeyPatch) -> Callable[[], Gate]:
    """From the call on, journal syncs wait for the gate's second event; its first is set when one starts."""

    def hold() -> Gate:
        entered, release = threading.Event(), threading.Event()
        real_sync = journal_file._sync

        def held(fd: int) -> None:
            entered.set()
            release.wait(GUARD)
            real_sync(fd)

        monkeypatch.setattr(journal_file, "_sync", held)
        return entered, release

    return hold


async def test_round_trip_keeps_every_field_and_rebuilds_the_reply(path: Path) -> None:
    """A reopened store hands out the same records, each with the reply the registry would build."""
    written = await fill(path)
    read = await reopened(path)
    assert sorted(read) == [0, 1, 2]
    for record in written:
        assert read[record.rank] == record
        assert read[record.rank].reply == encode_info(record) != b""


async def test_versions_continue_upward_after_reopen(path: Path) -> None:
    """A restarted registry starts from the last version written, a deletion's included."""
    await fill(path, 2)
    registry, store = await open_registry(path)
    assert registry.version == 2
    await registry.unregister(1)
    await store.journal.close()

    registry, store = await open_registry(path)
    assert registry.version == 3
    assert registry.get(1) is None
    record = await registry.register(5, "later", {})
    assert record.version == 4
    assert registry.get(0) is not None
    assert registry.get(0).version == 1  # type: ignore[union-attr]
    await store.journal.close()


async def test_delete_is_journaled_and_returns_what_was_stored(path: Path) -> None:
    """A deletion removes the rank now and after a reopen; deleting an absent rank changes nothing."""
    store = await open_store(path)
    record = Record(7, "s", {}, 1, 0.0, b"r")
    await store.put(record)
    assert await store.delete(7, 2) == record
    assert await store.delete(7, 3) is None
    assert store.get(7) is None
    await store.journal.close()
    assert await reopened(path) == {}


async def test_higher_version_wins_whatever_order_puts_finish(path: Path) -> None:
    """Two puts of one rank in one batch, the later version first: the higher version stays, also reopened."""
    store = await open_store(path)
    newer = Record(1, "newer", {}, 5, 0.0, b"n")
    older = Record(1, "older", {}, 3, 0.0, b"o")
    await asyncio.gather(store.put(newer), store.put(older))
    assert store.get(1) == newer
    assert store.last_version == 5
    await store.journal.close()
    assert (await reopened(path))[1].session_id == "newer"


async def test_torn_tail_is_skipped_with_a_warning(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A last line cut short by a crash is skipped with a warning; the lines before it load."""
    await fill(path)
    whole = read(path)
    write(path, whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 20])  # cut inside the last line
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        store = await open_store(path)
    assert sorted(record.rank for record in store) == [0, 1]
    assert store.journal.skipped == 1
    assert "cut short" in caplog.text
    await store.journal.close()


async def test_corrupt_line_is_skipped_and_the_rest_loads(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A line whose checksum fails (a flipped byte) is skipped; the lines around it still load."""
    await fill(path)
    lines = journal_lines(path)
    lines[3] = lines[3].replace(b'"s1"', b'"s9"')  # the put of rank 1, checksum now wrong
    write(path, b"\n".join(lines))
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        read = await reopened(path)
    assert sorted(read) == [0, 2]
    assert "line 4 (its checksum does not match)" in caplog.text


async def test_garbage_appended_is_skipped_and_the_good_prefix_survives(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Random bytes and lines appended after the journal are skipped; every good record loads."""
    written = await fill(path)
    append(path, os.urandom(300) + b"\nnot a line\n\x00\xff{}\n" + b"00000000 {}\n" + os.urandom(50))
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        read = await reopened(path)
    assert read == {record.rank: record for record in written}
    assert "skipped" in caplog.text


async def test_reopen_compacts_so_damage_and_history_do_not_pile_up(path: Path) -> None:
    """Opening rewrites the journal to its live records: a torn tail is gone and later appends load."""
    registry, store = await open_registry(path)
    for _ in range(5):
        await registry.register(0, "again", {})
    await store.journal.close()
    append(path, b"0123 torn")
    registry, store = await open_registry(path)
    assert len(journal_lines(path)) == 4  # magic, base version, one live record, final newline
    await registry.register(1, "after", {})
    await store.journal.close()
    read = await reopened(path)
    assert sorted(read) == [0, 1]
    assert read[0].version == 5


async def test_running_journal_is_compacted_once_it_outgrows_its_records(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-registering one rank over and over keeps the file bounded, and the latest registration loads."""
    monkeypatch.setattr(journal, "COMPACT_MIN_BYTES", 2000)
    registry, store = await open_registry(path)
    for round_ in range(200):
        await registry.register(0, f"round {round_}", {"pad": "x" * 50})
    size = len(read(path))
    await store.journal.close()
    assert size < 2000 * 2
    assert (await reopened(path))[0].session_id == "round 199"


async def test_concurrent_puts_share_one_sync(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst of registrations is group-committed: far fewer syncs than registrations."""
    registry, store = await open_registry(path)
    syncs = 0
    real_sync = journal_file._sync

    def counting_sync(fd: int) -> None:
        nonlocal syncs
        syncs += 1
        real_sync(fd)

    monkeypatch.setattr(journal_file, "_sync", counting_sync)
    await asyncio.gather(*(registry.register(rank, "s", {}) for rank in range(200)))
    await store.journal.close()
    assert syncs < 20
    assert len(await reopened(path)) == 200


async def test_failed_sync_is_not_acknowledged_and_changes_nothing(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write the disk refuses raises StateFileError (503); nothing shows, and later writes still work."""
    registry, store = await open_registry(path)
    await registry.register(0, "kept", {})
    real_sync = journal_file._sync

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(journal_file, "_sync", full_disk)
    with pytest.raises(StateFileError, match="No space left on device") as failure:
        await registry.register(1, "lost", {})
    assert failure.value.status == 503
    assert registry.get(1) is None
    monkeypatch.setattr(journal_file, "_sync", real_sync)
    await registry.register(2, "after", {})
    await store.journal.close()
    assert sorted(await reopened(path)) == [0, 2]


async def test_half_written_batch_is_cut_off_before_the_next_append(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails halfway, and whose cleanup fails too, does not corrupt the next batch."""
    registry, store = await open_registry(path)
    await registry.register(0, "kept", {})
    real_write, real_truncate = journal_file._write_all, os.ftruncate

    def half_write(fd: int, data: bytes) -> None:
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    def truncate_fails_once(fd: int, length: int) -> None:
        monkeypatch.setattr(os, "ftruncate", real_truncate)
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(journal_file, "_write_all", half_write)
    monkeypatch.setattr(os, "ftruncate", truncate_fails_once)
    with pytest.raises(StateFileError, match="Input/output error"):
        await registry.register(1, "lost", {})
    monkeypatch.setattr(journal_file, "_write_all", real_write)
    await registry.register(2, "after", {})
    await store.journal.close()
    store = await open_store(path)
    assert store.journal.skipped == 0
    assert sorted(record.rank for record in store) == [0, 2]
    await store.journal.close()


async def test_empty_file_is_an_empty_journal(path: Path) -> None:
    """A file created empty (``touch``) is taken as a journal with nothing in it."""
    write(path, b"")
    store = await open_store(path)
    assert len(store) == 0
    assert store.journal.skipped == 0
    await store.journal.close()
    assert read(path).startswith(b"aiobootstrap-journal 1\n")


async def test_waiters_wake_even_if_the_registering_client_hangs_up_mid_sync(
    path: Path, hold_syncs: Callable[[], Gate]
) -> None:
    """Cancelling a register while its sync is in flight still stores the record and wakes its waiters."""
    registry, store = await open_registry(path)
    entered, release = hold_syncs()
    waiter = asyncio.create_task(registry.wait(4, timeout=GUARD))
    await until(lambda: registry.parked == 1)
    registering = asyncio.create_task(registry.register(4, "hung up", {}))
    await until(entered.is_set)
    registering.cancel()
    with pytest.raises(asyncio.CancelledError):
        await registering
    release.set()
    async with asyncio.timeout(GUARD):
        record = await waiter
    assert record is not None
    assert record.session_id == "hung up"
    await store.journal.close()


async def test_registry_version_counts_only_durable_changes(
    path: Path, hold_syncs: Callable[[], Gate]
) -> None:
    """While a registration's sync is in flight, the registry neither shows it nor quotes its version."""
    registry, store = await open_registry(path)
    await registry.register(0, "first", {})
    entered, release = hold_syncs()
    registering = asyncio.create_task(registry.register(1, "in flight", {}))
    await until(entered.is_set)
    assert registry.version == 1
    assert registry.get(1) is None
    release.set()
    async with asyncio.timeout(GUARD):
        record = await registering
    assert registry.version == record.version == 2
    await store.journal.close()


async def test_foreign_file_is_refused_and_left_untouched(path: Path) -> None:
    """A state file that is not a journal is refused with a clear error, not overwritten."""
    write(path, b"precious data\n")
    with pytest.raises(StateFileError, match="not an aiobootstrap journal"):
        await open_store(path)
    assert read(path) == b"precious data\n"
    assert sorted(entry.name for entry in os.scandir(path.parent)) == [path.name]


async def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    """A state file in a directory that does not exist is refused, naming the directory."""
    with pytest.raises(StateFileError, match="does not exist"):
        await open_store(tmp_path / "absent" / "state")


async def test_second_store_on_the_same_file_is_refused(path: Path) -> None:
    """Two servers never write one journal: the second open fails while the first holds it."""
    store = await open_store(path)
    with pytest.raises(StateFileError, match="another aiobootstrap server holds it"):
        await open_store(path)
    await store.journal.close()
    second = await open_store(path)
    await second.journal.close()


async def test_puts_after_close_are_refused(path: Path) -> None:
    """A closed store refuses changes instead of losing them silently."""
    store = await open_store(path)
    await store.journal.close()
    with pytest.raises(StateFileError, match="closed"):
        await store.put(Record(0, "s", {}, 1, 0.0, b""))


def _lone_surrogate_weights() -> dict[str, Any]:
    return {"name": "\ud800 odd", "nested": {"list": [1.5, None, True, "\n"]}}


async def test_any_json_a_client_may_send_survives(path: Path) -> None:
    """Strings with newlines and lone surrogates, nested values: all read back equal."""
    registry, store = await open_registry(path)
    weights = _lone_surrogate_weights()
    await registry.register(0, "line\nbreak \udfff", weights)
    await store.journal.close()
    record = (await reopened(path))[0]
    assert record.session_id == "line\nbreak \udfff"
    assert record.weights_info_dict == weights


# -- namespaces -----------------------------------------------------------


async def test_namespaces_share_one_journal_and_keep_their_own_records(path: Path) -> None:
    """Each namespace's records come back in its own store; one rank may differ between namespaces."""
    journal = await Journal.open(path, encode_reply=encode_info)
    default, blue = Registry(journal.store(), encode_reply=encode_info), Registry(journal.store("blue"))
    await default.register(0, "default zero", {})
    await blue.register(0, "blue zero", {})
    await blue.register(1, "blue one", {})
    await journal.close()

    journal = await Journal.open(path, encode_reply=encode_info)
    assert len(journal) == 3
    assert [record.session_id for record in journal.store()] == ["default zero"]
    assert sorted(record.session_id for record in journal.store("blue")) == ["blue one", "blue zero"]
    assert list(journal.store("green")) == []
    await journal.close()


async def test_a_forgotten_namespace_never_reuses_a_version_after_restart(path: Path) -> None:
    """A namespace emptied before a restart goes on above every version the journal saw."""
    journal = await Journal.open(path, encode_reply=encode_info)
    red = Registry(journal.store("red"))
    await red.register(0, "gone", {})
    await red.unregister(0)
    assert red.version == 2
    await journal.close()

    journal = await Journal.open(path, encode_reply=encode_info)
    red = Registry(journal.store("red"))
    assert (await red.register(0, "back", {})).version > 2
    await journal.close()


async def test_a_namespace_with_a_registration_in_flight_is_not_swept(
    path: Path, hold_syncs: Callable[[], Gate]
) -> None:
    """While its first registration syncs, a namespace is not idle: a sweep keeps it and the record lands."""
    journal = await Journal.open(path, encode_reply=encode_info)
    namespaces = Namespaces(
        Registry(journal.store()), lambda name, last: Registry(journal.store(name, last)), limit=2
    )
    entered, release = hold_syncs()
    registering = asyncio.create_task(namespaces.get("busy").registry.register(0, "in flight", {}))
    await until(entered.is_set)
    with pytest.raises(ServerUnavailable, match="namespaces"):
        namespaces.get("other")  # at the limit, and "busy" may not be swept to make room
    release.set()
    async with asyncio.timeout(GUARD):
        await registering
    assert namespaces.get("busy").registry.get(0) is not None
    await journal.close()
