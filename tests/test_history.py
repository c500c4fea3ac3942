"""The watch history without HTTP: its floors, its bound, a resync, and changes it cannot diff."""

from __future__ import annotations

import asyncio

import pytest

from aiobootstrap._names import DEFAULT_ROLE, ENCODER_URLS, TRANSFER_ENGINE_INFO
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


async def test_an_encoder_change_without_its_record_is_a_410_not_a_guess():
    """A list change that came without its value (another replica's, over Redis) cannot be diffed."""
    store = MemoryStore()
    history = await _open(store)
    key = Key("default", ENCODER_URLS, DEFAULT_ROLE, 0)
    await store.set_member(key, "http://a", present=True)
    history.changed([Change(key, 2)])
    with pytest.raises(HistoryGone):
        await history.since("default", 1, 0)
    assert (await history.since("default", 2, 0))[0] == []
    # The next change has its value, but what it changed from is unknown: no guess either.
    await store.set_member(key, "http://b", present=True)  # the store holds a, b: version 2 here
    with pytest.raises(HistoryGone):
        await history.since("default", 1, 0)
    assert (await history.since("default", 2, 0))[0] == []
    # Known again from there on.
    await store.set_member(key, "http://a", present=False)
    changes, _ = await history.since("default", 2, 0)
    assert [(c.op, c.url) for c in changes] == [("delete", "http://a")]


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
