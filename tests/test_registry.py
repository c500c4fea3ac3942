"""The registry on its own: state and waiting, without HTTP."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from aiobootstrap import MemoryStore, Record, Registry, ShuttingDown, StoreUnavailable, TooManyWaiters
from aiobootstrap._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap._ranks import RankSet
from aiobootstrap.store import Change, Key
from aiobootstrap.wire.bodies import session_id_of, weights_of

from .helpers.registry import info_key, open_registry, register_in, stored, stored_count
from .helpers.waits import GUARD, until


async def wait_all(
    registry: Registry, spec: str, timeout: float, after: int = 0
) -> tuple[list[Record], RankSet]:
    """A set-wait for the ranks of ``spec`` (transfer-engine info, target, default namespace)."""
    return await registry.wait_all(
        "default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE, RankSet.parse(spec), timeout, after
    )


async def make_registry(**kwargs: Any) -> Registry:
    return await open_registry(**kwargs)


async def test_register_stores_info_under_a_new_version() -> None:
    """A registration is readable at once and carries its session id, weights and version."""
    registry = await make_registry()
    record = await register_in(registry, 3, "a:1", {"w": 1})
    assert await stored(registry, 3) == record
    assert (record.rank, session_id_of(record.value), weights_of(record.value), record.version) == (
        3,
        "a:1",
        {"w": 1},
        1,
    )
    assert await stored(registry, 4) is None


async def test_versions_strictly_increase_across_ranks() -> None:
    """Every registration, of any rank, gets a higher version than all before it."""
    registry = await make_registry()
    versions = [(await register_in(registry, rank % 3, "s", {})).version for rank in range(10)]
    assert versions == list(range(1, 11))
    assert await registry.store.version("default") == 10


async def test_wait_wakes_on_registration() -> None:
    """A parked wait returns the record the moment its rank registers."""
    registry = await make_registry()
    waiter = asyncio.create_task(registry.wait(info_key(5), timeout=GUARD))
    await until(lambda: registry.parked == 1)
    record = await register_in(registry, 5, "s", {})
    assert await asyncio.wait_for(waiter, GUARD) is record
    assert (registry.parked, registry.waiting_keys) == (0, 0)


async def test_one_registration_wakes_every_waiter_with_one_record() -> None:
    """All waiters of a rank wake together and share the one record delivered."""
    registry = await open_registry()
    waiters = [asyncio.create_task(registry.wait(info_key(1), timeout=GUARD)) for _ in range(100)]
    await until(lambda: registry.parked == 100)
    await register_in(registry, 1, "s", {})
    records = await asyncio.wait_for(asyncio.gather(*waiters), GUARD)
    assert all(record is records[0] for record in records)
    assert records[0] is not None


async def test_wait_runs_out_as_none_and_leaves_nothing() -> None:
    """Running out of time is an answer (None), and the rank's waitlist is gone afterwards."""
    registry = await make_registry()
    assert await registry.wait(info_key(7), timeout=0.01) is None
    assert (registry.parked, registry.waiting_keys) == (0, 0)


async def test_wait_zero_does_not_park() -> None:
    """timeout=0 answers from what is stored, without parking."""
    registry = await make_registry()
    assert await registry.wait(info_key(7), timeout=0) is None
    await register_in(registry, 7, "s", {})
    record = await registry.wait(info_key(7), timeout=0)
    assert record is not None
    assert record.rank == 7


async def test_after_waits_for_a_newer_registration() -> None:
    """wait(after=V) ignores the stored record of version V and returns the next one."""
    registry = await make_registry()
    first = await register_in(registry, 2, "old", {})
    waiter = asyncio.create_task(registry.wait(info_key(2), timeout=GUARD, after=first.version))
    await until(lambda: registry.parked == 1)
    await register_in(registry, 3, "other rank", {})
    assert not waiter.done()
    second = await register_in(registry, 2, "new", {})
    assert await asyncio.wait_for(waiter, GUARD) is second
    assert session_id_of(second.value) == "new"


async def test_reregistration_replaces_info_and_wakes_again() -> None:
    """A restarted worker's registration replaces its info and wakes a new round of waiters."""
    registry = await make_registry()
    await register_in(registry, 0, "first", {"a": 1})
    await register_in(registry, 0, "second", {"b": 2})
    record = await stored(registry, 0)
    assert record is not None
    assert (session_id_of(record.value), weights_of(record.value)) == ("second", {"b": 2})


async def test_cancelled_waiters_leave_nothing_behind() -> None:
    """Cancelling parked waits frees their waitlists: nothing grows per probed rank."""
    registry = await make_registry()
    waiters = [asyncio.create_task(registry.wait(info_key(rank), timeout=GUARD)) for rank in range(1000)]
    await until(lambda: registry.parked == 1000)
    assert registry.waiting_keys == 1000
    for waiter in waiters:
        waiter.cancel()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(result, asyncio.CancelledError) for result in results)
    assert (registry.parked, registry.waiting_keys) == (0, 0)


async def test_probing_unregistered_ranks_does_not_grow_memory() -> None:
    """Thousands of expired waits on never-registered ranks leave the registry as it was."""
    registry = await make_registry()
    gc.collect()
    await asyncio.gather(*(registry.wait(info_key(rank), timeout=0.001) for rank in range(5000)))
    assert (registry.parked, registry.waiting_keys, await stored_count(registry)) == (0, 0, 0)
    assert registry.waiting_keys == 0


async def test_wait_all_returns_when_the_last_rank_arrives() -> None:
    """A set-wait returns every record, by rank, once all have registered."""
    registry = await make_registry()
    await register_in(registry, 1, "s1", {})
    waiter = asyncio.create_task(wait_all(registry, "2,1,0,1", timeout=GUARD))
    await until(lambda: registry.parked == 1)
    await register_in(registry, 0, "s0", {})
    assert not waiter.done()
    await register_in(registry, 2, "s2", {})
    found, missing = await asyncio.wait_for(waiter, GUARD)
    assert [record.rank for record in found] == [0, 1, 2]
    assert not missing
    assert (registry.parked, registry.waiting_keys) == (0, 0)


async def test_wait_all_names_exactly_the_missing_ranks_on_timeout() -> None:
    """When time runs out, the set-wait reports which ranks are still missing."""
    registry = await make_registry()
    await register_in(registry, 0, "s", {})
    await register_in(registry, 2, "s", {})
    found, missing = await wait_all(registry, "0-4", timeout=0.01)
    assert [record.rank for record in found] == [0, 2]
    assert missing == RankSet.parse("1,3-4")
    assert (registry.parked, registry.waiting_keys) == (0, 0)


async def test_wait_all_with_after_needs_newer_versions() -> None:
    """A set-wait with after=V counts only registrations newer than V."""
    registry = await make_registry()
    await register_in(registry, 0, "old", {})
    mark = (await register_in(registry, 1, "old", {})).version
    waiter = asyncio.create_task(wait_all(registry, "0-1", timeout=GUARD, after=mark))
    await until(lambda: registry.parked == 1)
    await register_in(registry, 1, "new", {})
    await register_in(registry, 0, "new", {})
    found, missing = await asyncio.wait_for(waiter, GUARD)
    assert [session_id_of(record.value) for record in found] == ["new", "new"]
    assert not missing


async def test_close_answers_parked_waits_with_shutting_down() -> None:
    """close() wakes every parked wait, single and set, with ShuttingDown."""
    registry = await make_registry()
    single = asyncio.create_task(registry.wait(info_key(1), timeout=GUARD))
    batch = asyncio.create_task(wait_all(registry, "1-2", timeout=GUARD))
    await until(lambda: registry.parked == 2)
    registry.close()
    for waiter in (single, batch):
        with pytest.raises(ShuttingDown):
            await asyncio.wait_for(waiter, GUARD)
    with pytest.raises(ShuttingDown):
        await register_in(registry, 1, "s", {})
    assert (registry.parked, registry.waiting_keys) == (0, 0)


async def test_max_waiters_refuses_new_waits_only() -> None:
    """Beyond max_waiters a new wait is refused; the parked ones still get their answer."""
    registry = await make_registry(max_waiters=2)
    waiters = [asyncio.create_task(registry.wait(info_key(1), timeout=GUARD)) for _ in range(2)]
    await until(lambda: registry.parked == 2)
    with pytest.raises(TooManyWaiters):
        await registry.wait(info_key(1), timeout=GUARD)
    assert await registry.wait(info_key(1), timeout=0) is None  # not waiting is not refused
    await register_in(registry, 1, "s", {})
    assert all(record is not None for record in await asyncio.wait_for(asyncio.gather(*waiters), GUARD))


async def test_unregister_keeps_waiters_waiting() -> None:
    """After unregister the rank reads as absent, and waiters wait for a new registration."""
    registry = await make_registry()
    await register_in(registry, 4, "s", {})
    removed = await registry.unregister(info_key(4))
    assert removed is not None
    assert await stored(registry, 4) is None
    assert await registry.store.version("default") == 2
    waiter = asyncio.create_task(registry.wait(info_key(4), timeout=GUARD))
    await until(lambda: registry.parked == 1)
    record = await register_in(registry, 4, "back", {})
    assert await asyncio.wait_for(waiter, GUARD) is record
    assert await registry.unregister(info_key(99)) is None


class _FeedOnlyStore(MemoryStore):
    """A memory store whose feed carries keys only, as a feed from another process does."""

    async def open(self, listener: Any) -> None:
        class _KeysOnly:
            def changed(self, changes: Any) -> None:
                listener.changed([Change(c.key, c.version, deleted=c.deleted) for c in changes])

            def resync(self) -> None:
                listener.resync()

        await super().open(_KeysOnly())


async def test_a_change_that_carries_only_its_key_wakes_waiters_with_one_read() -> None:
    """A change made through another replica (no value on the feed) wakes every waiter of its
    key, which all get the record read once."""
    store = _FeedOnlyStore()
    reads: list[int] = []
    get_many = store.get_many

    async def counted(keys: Any) -> list[Record | None]:
        reads.append(len(keys))
        return await get_many(keys)

    store.get_many = counted  # type: ignore[method-assign]
    registry = await open_registry(store)
    waiters = [asyncio.create_task(registry.wait(info_key(2), timeout=GUARD)) for _ in range(20)]
    await until(lambda: registry.parked == 20)
    record = await register_in(registry, 2, "elsewhere", {})
    assert await asyncio.wait_for(asyncio.gather(*waiters), GUARD) == [record] * 20
    assert reads == [1]


async def test_resync_finds_a_change_the_feed_missed() -> None:
    """A registration the feed never announced is found when the store says it may have missed
    changes (a reconnect): parked waiters are answered."""
    store = MemoryStore()
    registry = await open_registry(store)
    waiter = asyncio.create_task(registry.wait(info_key(6), timeout=GUARD))
    await until(lambda: registry.parked == 1)
    await store.close()  # from here on the feed reaches nobody: a missed change
    record = await register_in(registry, 6, "missed", {})
    assert not waiter.done()
    registry.resync()
    assert await asyncio.wait_for(waiter, GUARD) == record


class _FlakyStore(MemoryStore):
    """A memory store whose reads fail while ``down`` is set, as an unreachable Redis does."""

    down = False

    async def get(self, key: Key) -> Record | None:
        if self.down:
            raise StoreUnavailable("The store is down.")
        return await super().get(key)

    async def get_many(self, keys: Any) -> list[Record | None]:
        if self.down:
            raise StoreUnavailable("The store is down.")
        return await super().get_many(keys)


async def test_a_wait_parked_while_the_store_is_down_is_answered_when_it_returns() -> None:
    """A read that fails is not an answer: the waiter parks, and a registration wakes it."""
    store = _FlakyStore()
    registry = await open_registry(store)
    store.down = True
    waiter = asyncio.create_task(registry.wait(info_key(1), timeout=GUARD))
    await until(lambda: registry.parked == 1)
    store.down = False
    record = await register_in(registry, 1, "back", {})
    assert await asyncio.wait_for(waiter, GUARD) == record


async def test_a_wait_that_runs_out_while_the_store_is_down_is_unavailable_not_absent() -> None:
    """At its deadline a wait reads the store once more: unreachable is StoreUnavailable (503),
    never None (404)."""
    store = _FlakyStore()
    registry = await open_registry(store)
    store.down = True
    with pytest.raises(StoreUnavailable):
        await registry.wait(info_key(1), timeout=0.01)
    with pytest.raises(StoreUnavailable):
        await wait_all(registry, "1-2", timeout=0.01)
    assert (registry.parked, registry.waiting_keys) == (0, 0)


async def test_a_change_during_the_parking_read_is_not_missed() -> None:
    """A registration landing while a waiter reads the store before parking still wakes it."""
    store = MemoryStore()
    registry = await open_registry(store)
    get = store.get
    raced: list[Record] = []

    async def get_then_register(key: Key) -> Record | None:
        record = await get(key)
        if not raced and registry.parked:
            # The waiter has read "absent"; the registration lands before it parks.
            raced.append(await register_in(registry, key.rank, "raced", {}))
        return record

    store.get = get_then_register  # type: ignore[method-assign]
    record = await asyncio.wait_for(registry.wait(info_key(3), timeout=GUARD), GUARD)
    assert raced
    assert record == raced[0]


async def test_versions_never_repeat_after_a_namespace_is_emptied() -> None:
    """A namespace whose last record is deleted is forgotten, but its versions never come back."""
    registry = await make_registry()
    key = info_key(0, "blue")
    first = await registry.register(key, {"session_id": "s", "weights_info_dict": {}})
    await registry.unregister(key)
    assert await registry.store.namespaces() == []
    again = await registry.register(key, {"session_id": "s", "weights_info_dict": {}})
    assert again.version > first.version + 1


class _Forgetful(MemoryStore):
    """A memory store whose incarnation the test changes, as a Redis store's does when Redis lost its data."""

    def __init__(self) -> None:
        super().__init__()
        self.now = "first"

    @property
    def incarnation(self) -> str:
        return self.now


async def test_a_wait_parked_across_a_new_incarnation_takes_its_first_record() -> None:
    """A wait for rank 0 newer than version 5, version 3 delivered meanwhile (not enough): once the store's
    incarnation changes, the new incarnation's version 1 answers it, not the old version 3, since a version
    counts in its incarnation only."""
    store = _Forgetful()
    registry = await open_registry(store)
    key = info_key(0)
    waiter = asyncio.create_task(registry.wait(key, timeout=GUARD, after=5))
    await until(lambda: registry.parked == 1)
    registry.changed([Change(key, 3, Record(key, {"session_id": "old"}, 3, 0.0))])
    await asyncio.sleep(0)
    assert not waiter.done()
    store.now = "second"
    fresh = Record(key, {"session_id": "new"}, 1, 0.0)
    registry.changed([Change(key, 1, fresh)])
    assert await asyncio.wait_for(waiter, GUARD) is fresh
