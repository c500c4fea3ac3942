"""The watch history without HTTP: its floors, its bound, a resync, set members, and changes not told."""

from __future__ import annotations

import asyncio

import pytest

from aiobootstrap._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap.core.history import History, listeners
from aiobootstrap.core.registry import Registry
from aiobootstrap.exceptions import HistoryGone, ShuttingDown
from aiobootstrap.store import Change, Key, MemoryStore, Store
from aiobootstrap.store.file import FileStore

from .helpers.waits import GUARD, until

VALUE = {"session_id": "s", "weights_info_dict": {}}


def _key(rank: int, namespace: str = "default") -> Key:
    return Key(namespace, TRANSFER_ENGINE_INFO, DEFAULT_ROLE, rank)


async def _open(store: Store, limit: int = 100) -> History:
    history = History(store, limit=limit)
    await store.open(listeners(Registry(store), history))
    await history.open()
    return history


async def test_a_new_namespace_is_watched_from_zero_after_others_were_forgotten():
    """A namespace numbered above the store's floor (others emptied) is still served from after=0."""
    store = MemoryStore()
    history = await _open(store)
    await store.put(_key(0, "a"), VALUE)
    await store.delete(_key(0, "a"))  # "a" is forgotten: the floor is 2
    await store.put(_key(0, "b"), VALUE)
    changes, version = await history.since("b", 0, 0)
    assert [(c.op, c.version) for c in changes] == [("put", 3)]
    assert version == 3


async def test_after_a_restart_the_history_starts_at_the_journal(tmp_path):
    """The file store reopened: changes before the restart are gone (410); after them, served."""
    path = str(tmp_path / "state")
    store = FileStore(path)
    await _open(store)
    await store.put(_key(0), VALUE)
    await store.put(_key(1), VALUE)
    await store.close()
    store = FileStore(path)
    history = await _open(store)
    with pytest.raises(HistoryGone) as gone:
        await history.since("default", 0, 0)
    assert gone.value.version == 2
    await store.put(_key(2), VALUE)
    changes, _ = await history.since("default", 2, 0)
    assert [c.rank for c in changes] == [2]
    await store.close()


async def test_the_bound_raises_the_floor():
    store = MemoryStore()
    history = await _open(store, limit=2)
    for rank in range(4):
        await store.put(_key(rank), VALUE)
    with pytest.raises(HistoryGone):
        await history.since("default", 1, 0)
    changes, _ = await history.since("default", 2, 0)
    assert [c.version for c in changes] == [3, 4]


async def test_a_resync_tells_watchers_behind_410():
    """The feed may have missed changes: a parked watcher behind the store's version is told 410."""
    store = MemoryStore()
    history = await _open(store)
    await store.put(_key(0), VALUE)
    watcher = asyncio.create_task(history.since("default", 1, GUARD))
    await until(lambda: history.watchers == 1)
    history.resync()
    history.changed([Change(_key(1), 3)])  # version 2 was missed: the new log vouches from 2 on
    with pytest.raises(HistoryGone):
        await asyncio.wait_for(watcher, GUARD)
    # A watcher at 2 is served: nothing it lacks was missed.
    assert [c.version for c in (await history.since("default", 2, 0))[0]] == [3]


async def test_a_set_member_change_is_logged_with_its_member_not_diffed():
    """Every store tells the member a set record's change added or removed (``Change.member``): the history
    logs it as it is, whether the change came with its record (a local write) or without (another replica's,
    over Redis), and never diffs a list."""
    store = MemoryStore()
    history = await _open(store)
    key = Key("default", "urls", DEFAULT_ROLE, 0)
    await store.set_member(key, "http://a", present=True)
    await store.set_member(key, "http://a", present=False)
    history.changed([Change(key, 3, member="+http://b")])  # another replica's: no record, its member named
    changes, version = await history.since("default", 0, 0)
    assert [(c.op, c.version, c.member) for c in changes] == [
        ("put", 1, "http://a"),
        ("delete", 2, "http://a"),
        ("put", 3, "http://b"),
    ]
    assert version == 3


async def test_the_host_says_which_changes_watchers_are_shown():
    """A change the host's ``shown`` refuses wakes the namespace but is not kept (the encoder face's evicted
    set): a watcher is not answered with it, and the next change it is told of comes in its place."""
    store = MemoryStore()
    history = History(store, shown=lambda change: change.role != "hidden")
    await store.open(listeners(Registry(store), history))
    await history.open()
    watcher = asyncio.create_task(history.since("default", 0, GUARD))
    await until(lambda: history.watchers == 1)
    await store.set_member(Key("default", "urls", "hidden", 0), "http://a", present=True)
    await asyncio.sleep(0)
    assert not watcher.done()
    await store.put(_key(0), VALUE)
    changes, version = await asyncio.wait_for(watcher, GUARD)
    assert [(c.op, c.rank, c.version) for c in changes] == [("put", 0, 2)]
    assert version == 2


async def test_close_wakes_watchers_with_shutting_down():
    history = await _open(MemoryStore())
    watcher = asyncio.create_task(history.since("default", 0, GUARD))
    await until(lambda: history.watchers == 1)
    history.close()
    with pytest.raises(ShuttingDown):
        await asyncio.wait_for(watcher, GUARD)
    assert history.watchers == 0


async def test_a_cancelled_watcher_leaves_nothing_behind():
    history = await _open(MemoryStore())
    watcher = asyncio.create_task(history.since("n", 0, GUARD))
    await until(lambda: history.watchers == 1)
    watcher.cancel()
    with pytest.raises(asyncio.CancelledError):
        await watcher
    assert history.watchers == 0
    assert history._logs == {}
