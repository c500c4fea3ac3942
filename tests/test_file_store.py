"""The file store: what it acknowledges survives a reopen, and a damaged journal never stops it."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from aiobootstrap import Registry
from aiobootstrap._names import DEFAULT_NAMESPACE, DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap.exceptions import TooManyNamespaces, TooManyRanks
from aiobootstrap.server.faces.records import encode_info
from aiobootstrap.store import Key, Record, StoreLimits, journal, staging
from aiobootstrap.store import file as file_store
from aiobootstrap.store.file import FileStore, StateFileError
from aiobootstrap.wire.bodies import session_id_of

from .helpers.file_store import line, open_file, reopened
from .helpers.registry import info_key
from .helpers.stores import ODD_VALUE, Feed, exact, info
from .helpers.waits import GUARD, until


async def ranks(store: FileStore) -> list[int]:
    """The ranks of the default namespace's transfer-engine infos in ``store``."""
    return [
        record.rank for record in await store.records(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, DEFAULT_ROLE)
    ]


async def fill(path: Path, count: int = 3) -> list[Record]:
    """Put ranks ``0..count-1`` into a store on ``path``, then close it."""
    store = await open_file(path)
    records = [await store.put(info_key(rank), info(f"s{rank}", {"w": [rank]})) for rank in range(count)]
    await store.close()
    return records


async def open_registry(path: Path) -> tuple[Registry, FileStore]:
    """A registry listening to a file store on ``path``."""
    store = FileStore(str(path))
    registry = Registry(store)
    await store.open(registry)
    return registry, store


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


def directory(path: Path) -> list[str]:
    return sorted(entry.name for entry in os.scandir(path))


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state.journal"


Gate = tuple[threading.Event, threading.Event]


@pytest.fixture
def hold_syncs(monkeypatch: pytest.MonkeyPatch) -> Callable[[], Gate]:
    """From the call on, journal syncs wait for the gate's second event; its first is set when one starts."""

    def hold() -> Gate:
        entered, release = threading.Event(), threading.Event()
        real_sync = journal._sync

        def held(fd: int) -> None:
            entered.set()
            release.wait(GUARD)
            real_sync(fd)

        monkeypatch.setattr(journal, "_sync", held)
        return entered, release

    return hold


# -- what survives a reopen ----------------------------------------------


async def test_round_trip_keeps_every_field_and_the_reply(path: Path) -> None:
    """A reopened store hands out the same records, and the registry builds the same reply from them."""
    written = await fill(path)
    read = await reopened(path)
    assert sorted(read) == [0, 1, 2]
    for record in written:
        assert read[record.rank] == record
        assert encode_info(read[record.rank]) == encode_info(record)


async def test_versions_continue_upward_after_reopen(path: Path) -> None:
    """A reopened store goes on from the last version written, a deletion's included."""
    await fill(path, 2)
    store = await open_file(path)
    assert await store.version(DEFAULT_NAMESPACE) == 2
    await store.delete(info_key(1))
    await store.close()

    store = await open_file(path)
    assert await store.version(DEFAULT_NAMESPACE) == 3
    assert await store.get(info_key(1)) is None
    assert (await store.put(info_key(5), info("later"))).version == 4
    zero = await store.get(info_key(0))
    assert zero is not None
    assert zero.version == 1
    await store.close()


async def test_delete_is_journaled_and_returns_what_was_stored(path: Path) -> None:
    """A deletion removes the rank now and after a reopen; deleting an absent rank changes nothing."""
    store = await open_file(path)
    record = await store.put(info_key(7), info())
    assert await store.delete(info_key(7)) == record
    assert await store.delete(info_key(7)) is None
    assert await store.get(info_key(7)) is None
    assert await store.version(DEFAULT_NAMESPACE) == 2
    await store.close()
    assert await reopened(path) == {}


async def test_higher_version_wins_whatever_order_the_journal_holds(path: Path) -> None:
    """Replaying a journal, an older put or delete of a key never undoes a newer put of it."""
    write(
        path,
        journal.MAGIC
        + line({"op": "put", "rank": 1, "version": 5, "at": 1.0, "value": info("newer")})
        + line({"op": "put", "rank": 1, "version": 3, "at": 2.0, "value": info("older")})
        + line({"op": "put", "rank": 2, "version": 4, "at": 3.0, "value": info("kept")})
        + line({"op": "del", "rank": 2, "version": 2}),
    )
    read = await reopened(path)
    assert session_id_of(read[1].value) == "newer"
    assert read[1].version == 5
    assert session_id_of(read[2].value) == "kept"


async def test_later_put_of_a_rank_in_one_batch_wins(path: Path) -> None:
    """Two puts of one rank committed in one batch: the later one stays, also after a reopen."""
    store = await open_file(path)
    first, second = await asyncio.gather(
        store.put(info_key(1), info("first")), store.put(info_key(1), info("second"))
    )
    assert second.version > first.version
    assert await store.get(info_key(1)) == second
    await store.close()
    assert (await reopened(path))[1] == second


# -- a damaged journal --------------------------------------------------


async def test_torn_tail_is_skipped_with_a_warning(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A last line cut short by a crash is skipped with a warning; the lines before it load."""
    await fill(path)
    whole = read(path)
    write(path, whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 20])  # cut inside the last line
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        store = await open_file(path)
    assert await ranks(store) == [0, 1]
    assert store.skipped == 1
    assert "cut short" in caplog.text
    await store.close()


async def test_corrupt_line_is_skipped_and_the_rest_loads(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A line whose checksum fails (a flipped byte) is skipped; the lines around it still load."""
    await fill(path)
    lines = journal_lines(path)
    assert b'"s1"' in lines[3]  # magic, base, rank 0, rank 1
    lines[3] = lines[3].replace(b'"s1"', b'"s9"')
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


async def test_empty_file_is_an_empty_journal(path: Path) -> None:
    """A file created empty (``touch``) is taken as a journal with nothing in it."""
    write(path, b"")
    store = await open_file(path)
    assert len(store) == 0
    assert store.skipped == 0
    await store.close()
    assert read(path).startswith(journal.MAGIC)


async def test_an_old_format_journal_still_loads(path: Path) -> None:
    """A journal from before record kinds (fields beside the rank, no value, no incarnation) loads as is."""
    weights = {"layer.0": {"shape": [4, 4], "addr": 140000}}
    write(
        path,
        journal.MAGIC
        + line({"op": "base", "version": 41})
        + line(
            {
                "op": "put",
                "rank": 3,
                "version": 42,
                "at": 1764460800.5,
                "session_id": "a:1",
                "weights_info_dict": weights,
            }
        )
        + line(
            {
                "op": "put",
                "rank": 4,
                "version": 43,
                "at": 1764460801.0,
                "session_id": "b:2",
                "weights_info_dict": {},
            }
        )
        + line({"op": "del", "rank": 4, "version": 44})
        + line(
            {
                "op": "put",
                "ns": "blue",
                "rank": 0,
                "version": 45,
                "at": 1764460802.25,
                "session_id": "c:3",
                "weights_info_dict": {},
            }
        )
        + line({"op": "put", "rank": 6, "version": 46, "at": 1764460803.0, "session_id": "no weights"}),
    )
    store = await open_file(path)
    assert store.skipped == 1  # an old line without its weights was never a registration
    assert store.incarnation
    three = await store.get(info_key(3))
    assert three is not None
    assert (three.value, three.version, three.registered_at) == (
        {"session_id": "a:1", "weights_info_dict": weights},
        42,
        1764460800.5,
    )
    assert await store.get(info_key(4)) is None
    blue = await store.get(info_key(0, "blue"))
    assert blue is not None
    assert (session_id_of(blue.value), blue.version) == ("c:3", 45)
    assert await store.version(DEFAULT_NAMESPACE) == 44
    assert (await store.put(info_key(5), info())).version == 45
    incarnation = store.incarnation
    await store.close()
    # Written back in today's format; the incarnation given at the upgrade stays.
    store = await open_file(path)
    assert store.incarnation == incarnation
    assert await ranks(store) == [3, 5]
    await store.close()
    assert b'"session_id":"a:1"' in read(path)
    assert all(b'"value"' in text for text in journal_lines(path) if b'"put"' in text)


# -- compaction ---------------------------------------------------------


async def test_reopen_compacts_so_damage_and_history_do_not_pile_up(path: Path) -> None:
    """Opening rewrites the journal to its live records: a torn tail is gone and later appends load."""
    store = await open_file(path)
    for _ in range(5):
        await store.put(info_key(0), info("again"))
    await store.close()
    append(path, b"0123 torn")
    store = await open_file(path)
    assert len(journal_lines(path)) == 4  # magic, base, one live record, final newline
    await store.put(info_key(1), info("after"))
    await store.close()
    read = await reopened(path)
    assert sorted(read) == [0, 1]
    assert read[0].version == 5


async def test_running_journal_is_compacted_once_it_outgrows_its_records(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-putting one rank over and over keeps the file bounded, and the latest put loads."""
    monkeypatch.setattr(file_store, "COMPACT_MIN_BYTES", 2000)
    store = await open_file(path)
    for round_ in range(100):
        await store.put(info_key(0), info(f"round {round_}", {"pad": "x" * 50}))
    size = len(read(path))
    await store.close()
    assert size < 2000 * 2
    read_back = await reopened(path)
    assert session_id_of(read_back[0].value) == "round 99"
    assert read_back[0].version == 100


# -- group commit and failures --------------------------------------------


async def test_concurrent_puts_share_one_sync(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst of puts is group-committed: queued while none is on disk, they share one write and one sync."""
    store = await open_file(path)
    syncs = 0
    real_sync = journal._sync

    def counting_sync(fd: int) -> None:
        nonlocal syncs
        syncs += 1
        real_sync(fd)

    monkeypatch.setattr(journal, "_sync", counting_sync)
    await asyncio.gather(*(store.put(info_key(rank), info()) for rank in range(200)))
    await store.close()
    assert syncs == 1
    assert len(await reopened(path)) == 200


async def test_failed_sync_is_not_acknowledged_and_changes_nothing(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write the disk refuses raises StateFileError (503); nothing shows or is heard, and its room comes back."""
    feed = Feed()
    store = await open_file(path, StoreLimits(max_ranks=2), feed)
    await store.put(info_key(0), info("kept"))
    real_sync = journal._sync

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(journal, "_sync", full_disk)
    with pytest.raises(StateFileError, match="No space left on device") as failure:
        await store.put(info_key(1), info("lost"))
    assert failure.value.status == 503
    assert await store.get(info_key(1)) is None
    assert await store.version(DEFAULT_NAMESPACE) == 1
    assert len(feed.changes) == 1
    monkeypatch.setattr(journal, "_sync", real_sync)
    # The failed put held the second place under the cap only while it was in flight.
    after = await store.put(info_key(2), info("after"))
    assert after.version > 1
    await store.close()
    assert sorted(await reopened(path)) == [0, 2]


async def test_half_written_batch_is_cut_off_before_the_next_append(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails halfway, and whose cleanup fails too, does not corrupt the next batch."""
    store = await open_file(path)
    await store.put(info_key(0), info("kept"))
    real_write, real_truncate = journal._write_all, os.ftruncate

    def half_write(fd: int, data: bytes) -> None:
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    def truncate_fails_once(fd: int, length: int) -> None:
        monkeypatch.setattr(os, "ftruncate", real_truncate)
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(journal, "_write_all", half_write)
    monkeypatch.setattr(os, "ftruncate", truncate_fails_once)
    with pytest.raises(StateFileError, match="Input/output error"):
        await store.put(info_key(1), info("lost"))
    monkeypatch.setattr(journal, "_write_all", real_write)
    await store.put(info_key(2), info("after"))
    await store.close()
    store = await open_file(path)
    assert store.skipped == 0
    assert await ranks(store) == [0, 2]
    await store.close()


async def test_waiters_wake_even_if_the_registering_client_hangs_up_mid_sync(
    path: Path, hold_syncs: Callable[[], Gate]
) -> None:
    """Cancelling a register while its sync is in flight still stores the record and wakes its waiters."""
    registry, store = await open_registry(path)
    entered, release = hold_syncs()
    waiter = asyncio.create_task(registry.wait(info_key(4), timeout=GUARD))
    await until(lambda: registry.parked == 1)
    registering = asyncio.create_task(registry.register(info_key(4), info("hung up")))
    await until(entered.is_set)
    registering.cancel()
    with pytest.raises(asyncio.CancelledError):
        await registering
    release.set()
    async with asyncio.timeout(GUARD):
        record = await waiter
    assert record is not None
    assert session_id_of(record.value) == "hung up"
    await store.close()
    assert (await reopened(path))[4] == record


async def test_version_counts_only_durable_changes(path: Path, hold_syncs: Callable[[], Gate]) -> None:
    """While a put's sync is in flight, the store neither shows it, quotes its version, nor announces it."""
    feed = Feed()
    store = await open_file(path, feed=feed)
    await store.put(info_key(0), info("first"))
    entered, release = hold_syncs()
    putting = asyncio.create_task(store.put(info_key(1), info("in flight")))
    await until(entered.is_set)
    assert await store.version(DEFAULT_NAMESPACE) == 1
    assert await store.get(info_key(1)) is None
    assert len(feed.changes) == 1
    release.set()
    async with asyncio.timeout(GUARD):
        record = await putting
    assert await store.version(DEFAULT_NAMESPACE) == record.version == 2
    assert feed.changes[-1].record == record
    await store.close()


async def test_nothing_stays_staged_once_every_change_has_landed(path: Path) -> None:
    """After puts and deletes land, no room or version is still held for them (namespaces come and go freely)."""
    store = await open_file(path, StoreLimits(max_namespaces=2))
    for round_ in range(20):
        namespace = f"ns{round_}"
        await asyncio.gather(*(store.put(info_key(rank, namespace), info()) for rank in range(3)))
        await asyncio.gather(*(store.delete(info_key(rank, namespace)) for rank in range(3)))
    assert await store.namespaces() == []
    assert store._staged == staging.Staged()
    await store.close()


# -- the file itself ------------------------------------------------------


async def test_foreign_file_is_refused_and_left_untouched(path: Path) -> None:
    """A state file that is not a journal is refused with a clear error, not overwritten."""
    write(path, b"precious data\n")
    with pytest.raises(StateFileError, match="not an aiobootstrap journal"):
        await open_file(path)
    assert read(path) == b"precious data\n"
    assert directory(path.parent) == [path.name]


async def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    """A state file in a directory that does not exist is refused, naming the directory."""
    with pytest.raises(StateFileError, match="does not exist"):
        await open_file(tmp_path / "absent" / "state")


async def test_second_store_on_the_same_file_is_refused(path: Path) -> None:
    """Two servers never write one journal: the second open fails while the first holds it."""
    store = await open_file(path)
    with pytest.raises(StateFileError, match="another aiobootstrap server holds it"):
        await open_file(path)
    await store.close()
    second = await open_file(path)
    await second.close()


async def test_changes_after_close_are_refused(path: Path) -> None:
    """A closed store refuses puts and deletes instead of losing them silently."""
    store = await open_file(path)
    await store.put(info_key(0), info())
    await store.close()
    with pytest.raises(StateFileError, match="closed"):
        await store.put(info_key(1), info())
    with pytest.raises(StateFileError, match="closed"):
        await store.delete(info_key(0))
    with pytest.raises(StateFileError, match="closed"):
        await store.ping()
    assert sorted(await reopened(path)) == [0]


async def test_incarnation_survives_a_reopen_and_a_new_file_gets_a_new_one(tmp_path: Path) -> None:
    """The incarnation names the file's data: the same after a reopen, another for another (or a lost) file."""
    first = await open_file(tmp_path / "one")
    incarnation = first.incarnation
    assert incarnation
    await first.put(info_key(0), info())
    await first.close()
    again = await open_file(tmp_path / "one")
    assert again.incarnation == incarnation
    await again.close()
    other = await open_file(tmp_path / "two")
    assert other.incarnation not in ("", incarnation)
    await other.close()
    os.unlink(tmp_path / "one")  # the data is lost: a new life begins
    lost = await open_file(tmp_path / "one")
    assert lost.incarnation not in ("", incarnation)
    await lost.close()


# -- values, kinds, roles and namespaces ---------------------------------


async def test_any_json_a_client_may_send_survives(path: Path) -> None:
    """Strings with newlines and lone surrogates, unicode, 64-bit integers, nested values: all read back exact."""
    store = await open_file(path)
    surrogates = info(
        "line\nbreak \udfff", {"name": "\ud800 odd", "nested": {"list": [1.5, None, True, "\n"]}}
    )
    await store.put(info_key(0), surrogates)
    await store.put(info_key(1), ODD_VALUE)
    await store.close()
    read = await reopened(path)
    assert exact(read[0].value) == exact(surrogates)
    assert exact(read[1].value) == exact(ODD_VALUE)


async def test_kinds_and_roles_round_trip(path: Path) -> None:
    """Records of another kind or role, with any JSON object as their value, come back under their own key."""
    layout = Key("blue", "kv_layout", "draft", 3)
    prefill = Key(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, "prefill", 0)
    odd_info = Key(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, DEFAULT_ROLE, 1)
    store = await open_file(path)
    written = {
        layout: await store.put(layout, {"layers": [[0, 1], [2, 3]], "dtype": "bf16"}),
        prefill: await store.put(prefill, info("prefill")),
        odd_info: await store.put(odd_info, {"anything": ["goes"]}),
        info_key(0): await store.put(info_key(0), info("target")),
    }
    await store.close()
    store = await open_file(path)
    assert store.skipped == 0
    for key, record in written.items():
        assert await store.get(key) == record
    assert await store.get(Key("blue", "kv_layout", DEFAULT_ROLE, 3)) is None
    assert await store.get(Key("blue", TRANSFER_ENGINE_INFO, "draft", 3)) is None
    assert await store.records(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, "prefill") == [written[prefill]]
    await store.close()


async def test_namespaces_share_one_journal_and_keep_their_own_records(path: Path) -> None:
    """Each namespace's records come back in their own namespace; one rank may differ between namespaces."""
    store = await open_file(path)
    await store.put(info_key(0), info("default zero"))
    await store.put(info_key(0, "blue"), info("blue zero"))
    await store.put(info_key(1, "blue"), info("blue one"))
    await store.close()

    store = await open_file(path)
    assert len(store) == 3
    assert await store.namespaces() == ["blue", "default"]
    assert [
        session_id_of(r.value)
        for r in await store.records(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, DEFAULT_ROLE)
    ] == ["default zero"]
    assert [
        session_id_of(r.value) for r in await store.records("blue", TRANSFER_ENGINE_INFO, DEFAULT_ROLE)
    ] == [
        "blue zero",
        "blue one",
    ]
    assert await store.records("green", TRANSFER_ENGINE_INFO, DEFAULT_ROLE) == []
    await store.close()


async def test_a_forgotten_namespace_never_reuses_a_version_after_restart(path: Path) -> None:
    """A namespace emptied before a restart goes on above every version the journal saw."""
    store = await open_file(path)
    await store.put(info_key(0, "red"), info("gone"))
    await store.delete(info_key(0, "red"))
    await store.close()

    store = await open_file(path)
    assert await store.namespaces() == []
    assert (await store.put(info_key(0, "red"), info("back"))).version > 2
    await store.close()


async def test_a_namespace_with_a_put_in_flight_holds_its_place(
    path: Path, hold_syncs: Callable[[], Gate]
) -> None:
    """While its first put syncs, a namespace counts under the cap: another is refused and the put lands."""
    store = await open_file(path, StoreLimits(max_namespaces=1))
    entered, release = hold_syncs()
    putting = asyncio.create_task(store.put(info_key(0, "busy"), info("in flight")))
    await until(entered.is_set)
    with pytest.raises(TooManyNamespaces):
        await store.put(info_key(0, "other"), info())
    release.set()
    async with asyncio.timeout(GUARD):
        await putting
    assert await store.namespaces() == ["busy"]
    await store.close()


# -- the rank cap ---------------------------------------------------------


@pytest.mark.parametrize("chunk", [64, 512])
async def test_rank_cap_is_exact_under_concurrency_and_after_reopen(path: Path, chunk: int) -> None:
    """2,000 distinct ranks put ``chunk`` at a time under a cap of 100: exactly 100 stored, also reopened."""
    limits = StoreLimits(max_ranks=100)
    store = await open_file(path, limits)
    stored: list[Record] = []
    refused = 0
    for start in range(0, 2000, chunk):
        results = await asyncio.gather(
            *(store.put(info_key(rank), info()) for rank in range(start, min(start + chunk, 2000))),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, Record):
                stored.append(result)
            else:
                assert isinstance(result, TooManyRanks)
                refused += 1
    assert (len(stored), refused) == (100, 1900)
    assert len(await store.records(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, DEFAULT_ROLE)) == 100
    await store.close()

    store = await open_file(path, limits)
    assert len(store) == 100
    assert await ranks(store) == sorted(record.rank for record in stored)
    with pytest.raises(TooManyRanks):
        await store.put(info_key(5000), info())
    await store.put(stored[0].key, info("replaced"))
    await store.close()
