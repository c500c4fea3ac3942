"""Leases in the store: expiry by the one timer, with tiny TTLs (the routes accept 1 s at least).

The store takes any positive TTL, so these tests grant leases of a few
hundredths of a second and await what expiry does (a waiter woken, a record
gone); they never sleep to let things settle. The heap itself is driven with
a hand-moved clock (``LeaseTable(clock=...)``).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from aiobootstrap._names import ENCODER_URLS, PARALLELISM_CONFIG
from aiobootstrap.core.registry import Registry
from aiobootstrap.exceptions import LeaseNotFound, TooManyLeases
from aiobootstrap.store import Key, MemoryStore, Record, StoreLimits
from aiobootstrap.store.leases import LeaseTable

from .conftest import GUARD, info_key, open_registry, until

TINY = 0.05
INFO = {"session_id": "s", "weights_info_dict": {}}


def config_key(rank: int) -> Key:
    return Key("default", PARALLELISM_CONFIG, "draft", rank)


def urls_key() -> Key:
    return Key("default", ENCODER_URLS, "target", 0)


async def lease_every_kind(registry: Registry, lease: str) -> Record:
    """One record of every kind on ``lease``, and an encoder URL on none beside it; the URL list's record."""
    await registry.register(info_key(0), INFO, lease)
    await registry.register(config_key(0), {"tp": 2}, lease)
    listed = await registry.set_member(urls_key(), "http://e1", present=True, lease=lease)
    await registry.set_member(urls_key(), "http://kept", present=True)
    assert listed is not None
    return listed


async def test_expiry_deletes_every_record_of_every_kind_and_wakes_a_waiter() -> None:
    """Within the deadline plus a second: info, config and encoder URL gone, each as a change; a list waiter woken."""
    store = MemoryStore()
    registry = await open_registry(store)
    lease = await store.grant_lease("default", TINY)
    started = time.monotonic()
    listed = await lease_every_kind(registry, lease.id)
    async with asyncio.timeout(GUARD):
        woken = await registry.wait(urls_key(), GUARD, after=listed.version + 1)
    assert woken is not None
    assert woken.value == {"members": ["http://kept"]}
    await until(lambda: len(store.lease_table) == 0 and store.peek(info_key(0)) is None)
    assert time.monotonic() - started < TINY + 1.0
    assert await store.get(config_key(0)) is None
    # Three deletions after four writes: each its own version.
    assert await store.version("default") == 7
    with pytest.raises(LeaseNotFound):
        await store.read_lease("default", lease.id)
    assert store.lease_table.expired == 1


async def test_keepalive_keeps_a_lease_past_its_ttl() -> None:
    """A lease kept alive at a third of its TTL outlives several TTLs; left alone, it then expires."""
    store = MemoryStore()
    registry = await open_registry(store)
    lease = await store.grant_lease("default", 0.5)
    await registry.register(info_key(1), INFO, lease.id)
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)  # the holder's keepalive period, not a settle
        await store.keepalive_lease("default", lease.id)
        assert store.peek(info_key(1)) is not None
    await until(lambda: store.peek(info_key(1)) is None)


async def test_a_record_moved_off_an_expiring_lease_stays() -> None:
    store = MemoryStore()
    registry = await open_registry(store)
    short = await store.grant_lease("default", TINY)
    long = await store.grant_lease("default", 60)
    await registry.register(info_key(2), INFO, short.id)
    await registry.register(info_key(3), INFO, short.id)
    await registry.register(info_key(2), INFO, long.id)
    await until(lambda: store.peek(info_key(3)) is None)
    assert store.peek(info_key(2)) is not None
    assert [key.rank for key, _ in (await store.read_lease("default", long.id)).records] == [2]


async def test_an_unregistered_record_leaves_its_lease() -> None:
    store = MemoryStore()
    registry = await open_registry(store)
    lease = await store.grant_lease("default", 60)
    await registry.register(info_key(4), INFO, lease.id)
    await registry.unregister(info_key(4))
    assert (await store.read_lease("default", lease.id)).records == ()
    await registry.set_member(urls_key(), "http://e", present=True, lease=lease.id)
    await registry.set_member(urls_key(), "http://e", present=False)
    assert (await store.read_lease("default", lease.id)).records == ()


async def test_a_full_store_refuses_a_leased_write_and_attaches_nothing() -> None:
    store = MemoryStore(StoreLimits(max_ranks=1))
    registry = await open_registry(store)
    lease = await store.grant_lease("default", 60)
    await registry.register(info_key(0), INFO, lease.id)
    with pytest.raises(Exception, match="limit"):
        await registry.register(info_key(1), INFO, lease.id)
    assert len((await store.read_lease("default", lease.id)).records) == 1


async def test_max_leases_is_the_stores() -> None:
    store = MemoryStore(StoreLimits(max_leases=1))
    await store.grant_lease("default", 60)
    with pytest.raises(TooManyLeases):
        await store.grant_lease("default", 60)


async def test_many_leases_share_one_timer_and_expire_together() -> None:
    """Ten thousand leases: no task or timer each; all expire, their records deleted."""
    store = MemoryStore()
    registry = await open_registry(store)
    tasks_before = len(asyncio.all_tasks())
    for rank in range(10_000):
        lease = await store.grant_lease("default", 0.2)
        await registry.register(info_key(rank), INFO, lease.id)
    assert len(asyncio.all_tasks()) == tasks_before
    await until(
        lambda: (
            len(store.lease_table) == 0
            and not store.peek_records("default", "transfer_engine_info", "target")
        )
    )
    assert store.lease_table.expired == 10_000


def test_the_heap_pushes_a_kept_lease_again_and_expires_it_at_its_new_deadline() -> None:
    """With a hand-moved clock: one heap entry per lease; a keepalive moves only the deadline."""
    now = [100.0]
    table = LeaseTable(clock=lambda: now[0])
    kept, left = table.grant("ns", 10), table.grant("ns", 10)
    now[0] = 105.0
    table.keepalive("ns", kept.id)
    now[0] = 110.0
    assert table.due() == [left]
    assert table.next_deadline() == 115.0
    now[0] = 114.9
    assert table.due() == []
    now[0] = 115.0
    assert table.due() == [kept]
    assert len(table) == 0
    assert table.next_deadline() is None


def test_revoked_leases_do_not_pile_up_in_the_heap() -> None:
    table = LeaseTable(clock=lambda: 0.0)
    for _ in range(5000):
        table.revoke("ns", table.grant("ns", 100).id)
    assert len(table._heap) <= 1024 + 1
