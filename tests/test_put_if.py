"""``Store.put_if``: a write that happens only if the record is still at the version the writer read.

The rules that keep a first value (Mooncake's RPC entries, the prefill topology) read, decide and
write with the version read; a writer that lost the race gets ``None`` and nothing changes. Each
test runs on every store in ``FLAVORS`` (memory, the journaled file, Redis); the last races two
Redis stores, as two replicas would.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiobootstrap.exceptions import LeaseNotFound
from aiobootstrap.store import ABSENT, Key, Store

from .helpers.stores import Feed
from .helpers.stores import feed as feed  # the fixtures, made for every store flavor
from .helpers.stores import flavor as flavor
from .helpers.stores import open_store as open_store
from .helpers.stores import store as store

KEY = Key.named("default", "metadata", "default", "mooncake/rpc_meta/node-1")


def rpc(port: int) -> dict[str, Any]:
    return {"ip_or_host_name": "127.0.0.1", "rpc_port": port}


async def test_a_first_value_is_written_only_while_there_is_none(store: Store, feed: Feed) -> None:
    first = await store.put_if(KEY, rpc(1), ABSENT)
    assert first is not None
    assert first.value == rpc(1)
    assert await store.put_if(KEY, rpc(2), ABSENT) is None
    assert (await store.get(KEY)) == first
    # The refused write took no version and said nothing on the feed.
    assert await store.version("default") == first.version
    assert [change.version for change in feed.changes if change.key == KEY] == [first.version]


async def test_a_write_at_the_version_read_wins_and_a_stale_one_changes_nothing(store: Store) -> None:
    first = await store.put(KEY, rpc(1))
    second = await store.put_if(KEY, rpc(2), first.version)
    assert second is not None
    assert second.version > first.version
    assert await store.put_if(KEY, rpc(3), first.version) is None
    assert (await store.get(KEY)) == second


async def test_absent_again_after_a_delete(store: Store) -> None:
    first = await store.put(KEY, rpc(1))
    await store.delete(KEY)
    assert await store.put_if(KEY, rpc(2), first.version) is None
    again = await store.put_if(KEY, rpc(2), ABSENT)
    assert again is not None
    assert (await store.get(KEY)) == again


async def test_of_writers_that_read_the_same_version_exactly_one_wins(store: Store) -> None:
    results = await asyncio.gather(*(store.put_if(KEY, rpc(port), ABSENT) for port in range(20)))
    won = [record for record in results if record is not None]
    assert len(won) == 1
    assert (await store.get(KEY)) == won[0]


async def test_the_write_may_be_held_by_a_lease_and_a_lost_lease_changes_nothing(store: Store) -> None:
    lease = await store.grant_lease("default", 30)
    record = await store.put_if(KEY, rpc(1), ABSENT, lease.id)
    assert record is not None
    assert (await store.leases_of([(KEY, None)]))[0] is not None
    await store.revoke_lease("default", lease.id)
    assert await store.get(KEY) is None
    with pytest.raises(LeaseNotFound):
        await store.put_if(KEY, rpc(2), ABSENT, lease.id)
    assert await store.get(KEY) is None


async def test_two_redis_replicas_racing_for_a_first_value_keep_one(redis_server: Any) -> None:
    from aiobootstrap.store.redis import RedisStore

    replicas = [RedisStore(redis_server.url), RedisStore(redis_server.url)]
    for replica in replicas:
        await replica.open(Feed())
    try:
        for round_ in range(10):
            key = Key.named("default", "metadata", "default", f"race-{round_}")
            writes = [replicas[n % 2].put_if(key, rpc(n), ABSENT) for n in range(8)]
            won = [record for record in await asyncio.gather(*writes) if record is not None]
            assert len(won) == 1
            assert [await replica.get(key) for replica in replicas] == [won[0], won[0]]
    finally:
        for replica in replicas:
            await replica.close()
