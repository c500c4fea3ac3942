"""The core's waits for more than one key, its conditions and its subscriptions (``core/registry/watchers``),
on the registry alone: no HTTP, no face."""

from __future__ import annotations

import asyncio
import collections
import gc
import tracemalloc
from collections.abc import Sequence
from typing import Any

import pytest

from aiobootstrap import MemoryStore, Record, ShuttingDown
from aiobootstrap.core.registry import AtLeast, Registry
from aiobootstrap.store import Change, Key

from .helpers.registry import open_registry
from .helpers.stores import Feed
from .helpers.waits import GUARD, until

NS, KIND, ROLE = "pd", "thing", "default"


def named(name: str, namespace: str = NS, kind: str = KIND) -> Key:
    return Key.named(namespace, kind, ROLE, name)


class CountingStore(MemoryStore):
    """A memory store that counts its read calls, and the records those calls returned."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()
        self.records_read = 0
        self.pause_records = False

    async def get(self, key: Key) -> Record | None:
        self.calls["get"] += 1
        record = await super().get(key)
        self.records_read += record is not None
        return record

    async def get_many(self, keys: Sequence[Key]) -> list[Record | None]:
        self.calls["get_many"] += 1
        records = await super().get_many(keys)
        self.records_read += sum(record is not None for record in records)
        return records

    async def records(self, namespace: str, kind: str, role: str) -> list[Record]:
        self.calls["records"] += 1
        if self.pause_records:
            await asyncio.sleep(0.05)  # a slow read: changes land while it is in flight
        records = await super().records(namespace, kind, role)
        self.records_read += len(records)
        return records

    async def count(self, namespace: str, kind: str, role: str) -> int:
        self.calls["count"] += 1
        return await super().count(namespace, kind, role)


def _empty(registry: Registry) -> bool:
    return (registry.parked, registry.waiting_keys, registry.watched_kinds) == (0, 0, 0)


# -- a set of keys -------------------------------------------------------------


async def test_a_set_of_names_is_answered_when_the_last_arrives() -> None:
    """wait_keys answers at once when every key is there, else when the last missing one arrives."""
    registry = await open_registry()
    await registry.register(named("a"), {"v": 1})
    assert [r and r.value for r in await registry.wait_keys([named("a")], GUARD)] == [{"v": 1}]
    keys = [named("a"), named("b"), named("c")]
    waiting = asyncio.create_task(registry.wait_keys(keys, GUARD))
    await until(lambda: registry.parked == 1)
    assert registry.waiting_keys == 2  # the missing ones only
    await registry.register(named("c"), {"v": 3})
    await registry.register(named("x"), {"v": 0})  # not asked for
    await asyncio.sleep(0)
    assert not waiting.done()
    await registry.register(named("b"), {"v": 2})
    records = await asyncio.wait_for(waiting, GUARD)
    assert [r and r.value["v"] for r in records] == [1, 2, 3]
    assert _empty(registry)


async def test_a_set_wait_that_runs_out_answers_what_is_there_and_leaves_nothing() -> None:
    registry = await open_registry()
    await registry.register(named("a"), {"v": 1})
    records = await registry.wait_keys([named("a"), named("never")], 0.05)
    assert [r and r.value["v"] for r in records] == [1, None]
    assert _empty(registry)


async def test_a_key_deleted_before_the_last_arrives_is_waited_for_again() -> None:
    """The set is read again when the last key arrives: one that left meanwhile is missing again."""
    registry = await open_registry()
    keys = [named("a"), named("b")]
    waiting = asyncio.create_task(registry.wait_keys(keys, GUARD))
    await until(lambda: registry.parked == 1)
    await registry.register(named("a"), {})
    await registry.unregister(named("a"))
    await registry.register(named("b"), {})
    await until(lambda: registry.waiting_keys == 1)
    assert not waiting.done()
    await registry.register(named("a"), {})
    assert None not in await asyncio.wait_for(waiting, GUARD)
    assert _empty(registry)


async def test_a_cancelled_set_wait_is_cancelled_and_leaves_nothing() -> None:
    registry = await open_registry()
    waiting = asyncio.create_task(registry.wait_keys([named(str(n)) for n in range(100)], GUARD))
    await until(lambda: registry.parked == 1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert _empty(registry)


async def test_probing_names_that_never_come_holds_no_memory() -> None:
    """Thousands of set waits for keys that never arrive, each timing out: nothing is kept afterwards."""
    registry = await open_registry()

    async def probe(round_: int) -> None:
        keys = [named(f"r{round_}-{n}") for n in range(20)]
        await asyncio.gather(*(registry.wait_keys(keys[n : n + 5], 0.001) for n in range(0, 20, 5)))

    await probe(-1)  # warm up (code paths, interned strings)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for round_ in range(200):
            await probe(round_)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert _empty(registry)
    assert grown < 64 * 1024, grown


async def test_closing_wakes_a_set_wait_with_shutting_down() -> None:
    registry = await open_registry()
    waiting = asyncio.create_task(registry.wait_keys([named("a")], GUARD))
    await until(lambda: registry.parked == 1)
    registry.close()
    with pytest.raises(ShuttingDown):
        await asyncio.wait_for(waiting, GUARD)
    assert _empty(registry)


# -- a condition ------------------------------------------------------------------


async def test_a_count_of_distinct_records_is_met_as_they_arrive() -> None:
    """AtLeast(3): a key registered twice counts once, one deleted counts no more, another kind not at all."""
    registry = await open_registry()
    await registry.register(named("a"), {})
    waiting = asyncio.create_task(registry.wait_until(AtLeast(NS, KIND, ROLE, 3), GUARD))
    await until(lambda: registry.parked == 1)
    await registry.register(named("a"), {"again": True})
    await registry.register(named("b"), {})
    await registry.unregister(named("b"))
    await registry.register(named("c"), {})
    await registry.register(named("d", kind="other"), {})
    await registry.register(named("e", namespace="elsewhere"), {})
    await asyncio.sleep(0)
    assert not waiting.done()
    await registry.register(named("b"), {})
    assert await asyncio.wait_for(waiting, GUARD) is True
    assert _empty(registry)


async def test_a_condition_that_runs_out_is_false_and_one_met_already_true_without_parking() -> None:
    registry = await open_registry()
    assert await registry.wait_until(AtLeast(NS, KIND, ROLE, 1), 0.05) is False
    assert await registry.wait_until(AtLeast(NS, KIND, ROLE, 1), 0) is False
    await registry.register(named("a"), {})
    assert await registry.wait_until(AtLeast(NS, KIND, ROLE, 1), GUARD) is True
    assert await registry.wait_until(AtLeast(NS, KIND, ROLE, 1), 0) is True
    assert _empty(registry)


async def test_waiters_of_one_condition_share_one_seed_and_arrivals_cost_no_reads() -> None:
    """A hundred waiters on one count: one read seeds it, and a thousand arrivals read nothing more."""
    store = CountingStore()
    registry = await open_registry(store)
    waiters = [
        asyncio.create_task(registry.wait_until(AtLeast(NS, KIND, ROLE, 1000), GUARD)) for _ in range(100)
    ]
    await until(lambda: registry.parked == 100)
    assert registry.watched_kinds == 1
    for n in range(1000):
        await registry.register(named(str(n)), {})
    assert await asyncio.wait_for(asyncio.gather(*waiters), GUARD) == [True] * 100
    assert dict(store.calls) == {"records": 1}
    assert store.records_read == 0
    assert _empty(registry)


async def test_changes_landing_while_the_seed_is_read_are_not_lost() -> None:
    """The condition listens before it reads: a record landing during the read is counted all the same."""
    store = CountingStore()
    registry = await open_registry(store)
    store.pause_records = True
    waiting = asyncio.create_task(registry.wait_until(AtLeast(NS, KIND, ROLE, 2), GUARD))
    await until(lambda: store.calls["records"] == 1)
    await registry.register(named("a"), {})
    await registry.register(named("b"), {})
    assert await asyncio.wait_for(waiting, GUARD) is True


async def test_a_resync_seeds_the_condition_again() -> None:
    """The feed may have missed changes: the condition is read again and answers from what the store holds."""
    store = CountingStore()
    registry = Registry(store)  # the feed is not heard: as if it missed every change
    await store.open(Feed())
    waiting = asyncio.create_task(registry.wait_until(AtLeast(NS, KIND, ROLE, 1), GUARD))
    await until(lambda: registry.parked == 1)
    await store.put(named("a"), {})
    await asyncio.sleep(0)
    assert not waiting.done()
    registry.resync()
    assert await asyncio.wait_for(waiting, GUARD) is True
    assert store.calls["records"] == 2


async def test_a_cancelled_condition_wait_is_cancelled_and_leaves_nothing() -> None:
    registry = await open_registry()
    waiting = asyncio.create_task(registry.wait_until(AtLeast(NS, KIND, ROLE, 5), GUARD))
    await until(lambda: registry.parked == 1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert _empty(registry)


async def test_closing_wakes_a_condition_wait_with_shutting_down() -> None:
    registry = await open_registry()
    waiting = asyncio.create_task(registry.wait_until(AtLeast(NS, KIND, ROLE, 5), GUARD))
    await until(lambda: registry.parked == 1)
    registry.close()
    with pytest.raises(ShuttingDown):
        await asyncio.wait_for(waiting, GUARD)
    assert _empty(registry)


# -- a subscription ------------------------------------------------------------------


async def test_a_subscriber_hears_its_kinds_changes_and_parks_no_wait() -> None:
    """Every change of (namespace, kind), with its record, in order; none of another; nothing parked."""
    registry = await open_registry()
    heard = Feed()
    unsubscribe = registry.subscribe(NS, KIND, heard)
    assert (registry.parked, registry.watched_kinds) == (0, 1)
    await registry.register(named("a"), {"v": 1})
    await registry.register(named("a", kind="other"), {"v": 2})
    await registry.unregister(named("a"))
    assert [(c.key.name, c.deleted, c.record and c.record.value) for c in heard.changes] == [
        ("a", False, {"v": 1}),
        ("a", True, None),
    ]
    registry.resync()
    assert heard.resyncs == 1
    unsubscribe()
    await registry.register(named("b"), {})
    assert len(heard.changes) == 2
    assert _empty(registry)


async def test_a_failing_subscriber_is_logged_and_the_waiters_still_wake(caplog: Any) -> None:
    registry = await open_registry()

    class Broken(Feed):
        def changed(self, changes: Sequence[Change]) -> None:
            raise RuntimeError("a subscriber's bug")

    registry.subscribe(NS, KIND, Broken())
    waiting = asyncio.create_task(registry.wait_keys([named("a")], GUARD))
    await until(lambda: registry.parked == 1)
    await registry.register(named("a"), {})
    assert None not in await asyncio.wait_for(waiting, GUARD)
    assert "A subscriber to a kind's changes failed" in caplog.text


async def test_the_oldest_waits_count_set_waits_and_conditions() -> None:
    """/metrics' oldest wait per (namespace, kind, role) sees a set wait and a condition wait too."""
    registry = await open_registry()
    keys = asyncio.create_task(registry.wait_keys([named("a")], GUARD))
    condition = asyncio.create_task(registry.wait_until(AtLeast(NS, "other", ROLE, 1), GUARD))
    await until(lambda: registry.parked == 2)
    assert set(registry.oldest_waits()) == {(NS, KIND, ROLE), (NS, "other", ROLE)}
    keys.cancel()
    condition.cancel()
    await asyncio.gather(keys, condition, return_exceptions=True)
    assert registry.oldest_waits() == {}


async def test_a_resync_during_the_seed_read_reads_again() -> None:
    """The feed may have missed changes while the seed was being read: that read is not trusted, one more is made."""
    store = CountingStore()
    registry = Registry(store)  # the feed is not heard: as if it missed every change
    await store.open(Feed())
    store.pause_records = True
    waiting = asyncio.create_task(registry.wait_until(AtLeast(NS, KIND, ROLE, 1), GUARD))
    await until(lambda: store.calls["records"] == 1)
    await store.put(named("a"), {})
    registry.resync()
    assert await asyncio.wait_for(waiting, GUARD) is True
    assert store.calls["records"] == 2


async def test_closing_wakes_a_condition_wait_whose_seed_the_store_refuses() -> None:
    """A condition waiting for its seed while the store is unreachable (reading again and again) is answered
    by close() with ShuttingDown, as every other wait is, not left to run out its time."""
    from aiobootstrap.exceptions import StoreUnavailable

    class Down(CountingStore):
        async def records(self, namespace: str, kind: str, role: str) -> list[Record]:
            self.calls["records"] += 1
            raise StoreUnavailable("down")

    store = Down()
    registry = Registry(store)
    await store.open(Feed())
    waiting = asyncio.create_task(registry.wait_until(AtLeast(NS, KIND, ROLE, 1), 60.0))
    await until(lambda: store.calls["records"] >= 2)
    registry.close()
    with pytest.raises(ShuttingDown):
        await asyncio.wait_for(waiting, GUARD)
    assert _empty(registry)
