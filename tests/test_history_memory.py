"""The watch history keeps its changes within a memory budget (``--watch-history-memory``), whatever the
count per namespace allows: 100,000 changes x 1,024 namespaces of long roles was about 29 GiB."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from aiobootstrap import ServerConfig
from aiobootstrap._names import TRANSFER_ENGINE_INFO
from aiobootstrap.core.history import History, listeners
from aiobootstrap.core.registry import Registry
from aiobootstrap.exceptions import HistoryGone
from aiobootstrap.store import Key, MemoryStore

VALUE = {"session_id": "s", "weights_info_dict": {}}
BUDGET = 2 * 1024 * 1024
ROLE = "r" * 200
"""A long role: a change of it costs about 410 bytes, kept."""


async def _history(store: MemoryStore, memory: int) -> History:
    history = History(store, limit=100_000, memory=memory)
    await store.open(listeners(Registry(store), history))
    await history.open()
    return history


async def _churn(store: MemoryStore, namespace: str, changes: int) -> None:
    # Fresh role texts, as requests bring them: each change holds its own.
    for n in range(changes):
        await store.put(Key(namespace, TRANSFER_ENGINE_INFO, ROLE[:-1] + str(n % 10), n % 50), VALUE)


async def test_the_kept_changes_stay_within_the_budget_as_measured() -> None:
    """10,000 changes of long roles (about 4 MiB kept) into a 2 MiB budget: the history counts itself within
    it, and what it holds, measured, is within it too (10% for the estimate's slack)."""
    store = MemoryStore()
    gc.collect()
    tracemalloc.start()
    try:
        history = await _history(store, BUDGET)
        before = tracemalloc.get_traced_memory()[0]
        await _churn(store, "busy", 10_000)
        store_only = MemoryStore()  # what the store itself holds of the same changes, subtracted
        await store_only.open(Registry(store_only))
        start = tracemalloc.get_traced_memory()[0]
        await _churn(store_only, "busy", 10_000)
        stored = tracemalloc.get_traced_memory()[0] - start
        held = start - before - stored
    finally:
        tracemalloc.stop()
    assert history.bytes <= BUDGET
    assert held < BUDGET * 1.1, f"the history holds {held} bytes for a budget of {BUDGET}"
    changes, version = await history.since("busy", 9_990, 0)
    assert [change.version for change in changes] == list(range(9_991, 10_001))
    assert version == 10_000
    with pytest.raises(HistoryGone):
        await history.since("busy", 0, 0)


async def test_the_largest_logs_lose_their_oldest_first() -> None:
    """A busy namespace past the budget gives up its oldest changes; a quiet one keeps its whole history."""
    store = MemoryStore()
    history = await _history(store, BUDGET)
    await store.put(Key("quiet", TRANSFER_ENGINE_INFO, "target", 0), VALUE)
    await _churn(store, "busy", 10_000)
    changes, _ = await history.since("quiet", 0, 0)
    assert [change.rank for change in changes] == [0]  # still answered from its start
    with pytest.raises(HistoryGone) as gone:
        await history.since("busy", 1, 0)
    assert gone.value.version > 1
    assert history.bytes <= BUDGET


def test_the_budget_is_a_setting() -> None:
    """256 MiB by default; at least 1 byte."""
    assert ServerConfig().watch_history_memory == 256 * 1024 * 1024
    with pytest.raises(ValueError, match="watch history memory must be at least 1 byte"):
        ServerConfig(watch_history_memory=0)
