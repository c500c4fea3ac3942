"""The registry on its own: state and waiting, without HTTP."""

from __future__ import annotations

import asyncio
import gc

import pytest

from aiobootstrap import MemoryStore, Record, Registry, ShuttingDown, TooManyWaiters

from .conftest import GUARD, until


def make_registry(**kwargs: object) -> Registry:
    return Registry(encode_reply=lambda record: f"v{record.version}".encode(), **kwargs)  # type: ignore[arg-type]


async def test_register_stores_info_under_a_new_version() -> None:
    """A registration is readable at once and carries its session id, weights and version."""
    registry = make_registry()
    record = await registry.register(3, "a:1", {"w": 1})
    assert registry.get(3) == record
    assert (record.rank, record.session_id, record.weights_info_dict, record.version) == (
        3,
        "a:1",
        {"w": 1},
        1,
    )
    assert record.reply == b"v1"
    assert registry.get(4) is None


async def test_versions_strictly_increase_across_ranks() -> None:
    """Every registration, of any rank, gets a higher version than all before it."""
    registry = make_registry()
    versions = [(await registry.register(rank % 3, "s", {})).version for rank in range(10)]
    assert versions == list(range(1, 11))
    assert registry.version == 10


async def test_wait_wakes_on_registration() -> None:
    """A parked wait returns the record the moment its rank registers."""
    registry = make_registry()
    waiter = asyncio.create_task(registry.wait(5, timeout=GUARD))
    await until(lambda: registry.parked == 1)
    record = await registry.register(5, "s", {})
    assert await asyncio.wait_for(waiter, GUARD) is record
    assert (registry.parked, registry.waiting_ranks) == (0, 0)


async def test_one_registration_wakes_every_waiter_with_one_encoding() -> None:
    """All waiters of a rank wake together and share the reply encoded once."""
    encodings: list[int] = []

    def encode(record: Record) -> bytes:
        encodings.append(record.version)
        return b"reply"

    registry = Registry(encode_reply=encode)
    waiters = [asyncio.create_task(registry.wait(1, timeout=GUARD)) for _ in range(100)]
    await until(lambda: registry.parked == 100)
    await registry.register(1, "s", {})
    records = await asyncio.wait_for(asyncio.gather(*waiters), GUARD)
    assert all(record is records[0] for record in records)
    assert records[0] is not None
    assert encodings == [1]


async def test_wait_runs_out_as_none_and_leaves_nothing() -> None:
    """Running out of time is an answer (None), and the rank's waitlist is gone afterwards."""
    registry = make_registry()
    assert await registry.wait(7, timeout=0.01) is None
    assert (registry.parked, registry.waiting_ranks) == (0, 0)


async def test_wait_zero_does_not_park() -> None:
    """timeout=0 answers from what is stored, without parking."""
    registry = make_registry()
    assert await registry.wait(7, timeout=0) is None
    await registry.register(7, "s", {})
    record = await registry.wait(7, timeout=0)
    assert record is not None
    assert record.rank == 7


async def test_after_waits_for_a_newer_registration() -> None:
    """wait(after=V) ignores the stored record of version V and returns the next one."""
    registry = make_registry()
    first = await registry.register(2, "old", {})
    waiter = asyncio.create_task(registry.wait(2, timeout=GUARD, after=first.version))
    await until(lambda: registry.parked == 1)
    await registry.register(3, "other rank", {})
    assert not waiter.done()
    second = await registry.register(2, "new", {})
    assert await asyncio.wait_for(waiter, GUARD) is second
    assert second.session_id == "new"


async def test_reregistration_replaces_info_and_wakes_again() -> None:
    """A restarted worker's registration replaces its info and wakes a new round of waiters."""
    registry = make_registry()
    await registry.register(0, "first", {"a": 1})
    await registry.register(0, "second", {"b": 2})
    record = registry.get(0)
    assert record is not None
    assert (record.session_id, record.weights_info_dict) == ("second", {"b": 2})


async def test_cancelled_waiters_leave_nothing_behind() -> None:
    """Cancelling parked waits frees their waitlists: nothing grows per probed rank."""
    registry = make_registry()
    waiters = [asyncio.create_task(registry.wait(rank, timeout=GUARD)) for rank in range(1000)]
    await until(lambda: registry.parked == 1000)
    assert registry.waiting_ranks == 1000
    for waiter in waiters:
        waiter.cancel()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(result, asyncio.CancelledError) for result in results)
    assert (registry.parked, registry.waiting_ranks) == (0, 0)


async def test_probing_unregistered_ranks_does_not_grow_memory() -> None:
    """Thousands of expired waits on never-registered ranks leave the registry as it was."""
    registry = make_registry()
    gc.collect()
    await asyncio.gather(*(registry.wait(rank, timeout=0.001) for rank in range(5000)))
    assert (registry.parked, registry.waiting_ranks, len(registry)) == (0, 0, 0)
    assert not registry._waitlists


async def test_wait_all_returns_when_the_last_rank_arrives() -> None:
    """A set-wait returns every record, in the order asked, once all have registered."""
    registry = make_registry()
    await registry.register(1, "s1", {})
    waiter = asyncio.create_task(registry.wait_all([2, 1, 0, 1], timeout=GUARD))
    await until(lambda: registry.parked == 1)
    await registry.register(0, "s0", {})
    assert not waiter.done()
    await registry.register(2, "s2", {})
    found, missing = await asyncio.wait_for(waiter, GUARD)
    assert [record.rank for record in found] == [2, 1, 0]
    assert missing == []
    assert (registry.parked, registry.waiting_ranks) == (0, 0)


async def test_wait_all_names_exactly_the_missing_ranks_on_timeout() -> None:
    """When time runs out, the set-wait reports which ranks are still missing."""
    registry = make_registry()
    await registry.register(0, "s", {})
    await registry.register(2, "s", {})
    found, missing = await registry.wait_all(range(5), timeout=0.01)
    assert [record.rank for record in found] == [0, 2]
    assert missing == [1, 3, 4]
    assert (registry.parked, registry.waiting_ranks) == (0, 0)


async def test_wait_all_with_after_needs_newer_versions() -> None:
    """A set-wait with after=V counts only registrations newer than V."""
    registry = make_registry()
    await registry.register(0, "old", {})
    mark = (await registry.register(1, "old", {})).version
    waiter = asyncio.create_task(registry.wait_all([0, 1], timeout=GUARD, after=mark))
    await until(lambda: registry.parked == 1)
    await registry.register(1, "new", {})
    await registry.register(0, "new", {})
    found, missing = await asyncio.wait_for(waiter, GUARD)
    assert [record.session_id for record in found] == ["new", "new"]
    assert missing == []


async def test_close_answers_parked_waits_with_shutting_down() -> None:
    """close() wakes every parked wait, single and set, with ShuttingDown."""
    registry = make_registry()
    single = asyncio.create_task(registry.wait(1, timeout=GUARD))
    batch = asyncio.create_task(registry.wait_all([1, 2], timeout=GUARD))
    await until(lambda: registry.parked == 2)
    registry.close()
    for waiter in (single, batch):
        with pytest.raises(ShuttingDown):
            await asyncio.wait_for(waiter, GUARD)
    with pytest.raises(ShuttingDown):
        await registry.register(1, "s", {})
    assert (registry.parked, registry.waiting_ranks) == (0, 0)


async def test_max_waiters_refuses_new_waits_only() -> None:
    """Beyond max_waiters a new wait is refused; the parked ones still get their answer."""
    registry = make_registry(max_waiters=2)
    waiters = [asyncio.create_task(registry.wait(1, timeout=GUARD)) for _ in range(2)]
    await until(lambda: registry.parked == 2)
    with pytest.raises(TooManyWaiters):
        await registry.wait(1, timeout=GUARD)
    assert await registry.wait(1, timeout=0) is None  # not waiting is not refused
    await registry.register(1, "s", {})
    assert all(record is not None for record in await asyncio.wait_for(asyncio.gather(*waiters), GUARD))


async def test_unregister_keeps_waiters_waiting() -> None:
    """After unregister the rank reads as absent, and waiters wait for a new registration."""
    registry = make_registry()
    await registry.register(4, "s", {})
    removed = await registry.unregister(4)
    assert removed is not None
    assert registry.get(4) is None
    assert registry.version == 2
    waiter = asyncio.create_task(registry.wait(4, timeout=GUARD))
    await until(lambda: registry.parked == 1)
    record = await registry.register(4, "back", {})
    assert await asyncio.wait_for(waiter, GUARD) is record
    assert await registry.unregister(99) is None


async def test_memory_store_keeps_the_higher_version_when_puts_cross() -> None:
    """A store whose puts finish out of order still keeps the later registration."""
    store = MemoryStore()
    newer = Record(1, "new", {}, version=2, registered_at=0.0)
    older = Record(1, "old", {}, version=1, registered_at=0.0)
    await store.put(newer)
    await store.put(older)
    assert store.get(1) is newer
    assert store.last_version == 2


async def test_registry_continues_versions_from_its_store() -> None:
    """A registry over a store with history numbers new registrations above it."""
    store = MemoryStore([Record(0, "s", {}, version=41, registered_at=0.0)])
    registry = make_registry(store=store)
    assert (await registry.register(1, "s", {})).version == 42
