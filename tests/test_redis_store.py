"""The Redis store, at the store's own interface: two RedisStores on one real Redis play two replicas.

Every test starts its own redis-server (``redis_server``, AOF always) and
awaits events (a change heard, a resync announced) under a guard timeout;
nothing sleeps to let things settle.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import random
import subprocess
import sys
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trustme

from aiobootstrap._names import TRANSFER_ENGINE_INFO
from aiobootstrap.exceptions import StoreUnavailable, TooManyNamespaces, TooManyRanks
from aiobootstrap.store import Change, Key, MemoryStore, Record, Store, StoreLimits, describe, open_store
from aiobootstrap.store.redis import RedisStore
from testbed.redis_server import REDIS_SERVER, SKIP_REASON, RedisServer, free_port

from .helpers.redis_store import FAST, Recorder
from .helpers.waits import GUARD


def key(rank: int, namespace: str = "default", role: str = "target", kind: str = TRANSFER_ENGINE_INFO) -> Key:
    return Key(namespace, kind, role, rank)


def info(session: str = "10.0.0.7:18000") -> dict[str, Any]:
    return {"session_id": session, "weights_info_dict": {"w": [1, 2, 3]}}


class Replica:
    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self.heard = Recorder()


@pytest.fixture
async def pair(redis_server: RedisServer) -> AsyncIterator[tuple[Replica, Replica]]:
    """Two replicas, A and B, over one Redis."""
    a = Replica(RedisStore(redis_server.url, **FAST))  # type: ignore[arg-type]
    b = Replica(RedisStore(redis_server.url, **FAST))  # type: ignore[arg-type]
    await a.store.open(a.heard)
    await b.store.open(b.heard)
    try:
        yield a, b
    finally:
        await a.store.close()
        await b.store.close()


async def opened(url: str, **kwargs: Any) -> Replica:
    replica = Replica(RedisStore(url, **{**FAST, **kwargs}))
    await replica.store.open(replica.heard)
    return replica


# -- the interface ------------------------------------------------------------


async def test_put_get_delete_and_reads_across_replicas(pair: tuple[Replica, Replica]) -> None:
    """A put through A is read through B at once; delete returns what was stored and takes a version once."""
    a, b = pair
    first = await a.store.put(key(3), info("s3"))
    assert (first.version, first.value) == (1, info("s3"))
    second = await a.store.put(key(1), info("s1"))
    assert second.version == 2

    assert await b.store.get(key(3)) == first
    assert await b.store.get(key(9)) is None
    assert await b.store.get_many([key(3), key(9), key(1), key(3, role="draft")]) == [
        first,
        None,
        second,
        None,
    ]
    assert await b.store.get_many([]) == []
    assert await b.store.records("default", TRANSFER_ENGINE_INFO, "target") == [second, first]
    assert await b.store.version("default") == 2
    assert await b.store.namespaces() == ["default"]

    assert await b.store.delete(key(3)) == first
    assert await a.store.get(key(3)) is None
    assert await a.store.delete(key(3)) is None
    assert await a.store.version("default") == 3, "a delete that removed nothing takes no version"
    await b.store.ping()


async def test_roles_and_kinds_are_separate_records(pair: tuple[Replica, Replica]) -> None:
    """(kind, role, rank) are apart: a draft's rank 0 never replaces the target's, and odd roles cannot collide."""
    a, b = pair
    target = await a.store.put(key(0), info("target"))
    draft = await a.store.put(key(0, role="draft"), info("draft"))
    odd = await a.store.put(key(0, role="x:y:{z} é"), info("odd"))
    config = await a.store.put(key(0, kind="parallelism_config"), {"tp": 8})
    assert await b.store.get_many([key(0), key(0, role="draft"), key(0, role="x:y:{z} é")]) == [
        target,
        draft,
        odd,
    ]
    assert await b.store.get(key(0, kind="parallelism_config")) == config
    assert await b.store.records("default", TRANSFER_ENGINE_INFO, "x:y") == []


async def test_versions_strictly_increase_under_concurrent_writes_through_both(
    pair: tuple[Replica, Replica],
) -> None:
    """Concurrent puts and deletes through A and B take distinct versions, one counter per namespace."""
    a, b = pair

    async def writes(store: Store, ranks: range) -> list[int]:
        # In one task: each version this writer takes is above the one before.
        versions = []
        for rank in ranks:
            versions.append((await store.put(key(rank % 10), info())).version)
            if rank % 3 == 0:
                removed = await store.delete(key(rank % 10))
                versions.extend([] if removed is None else [await store.version("default")])
        return versions

    through_a, through_b, *in_other = await asyncio.gather(
        writes(a.store, range(0, 60)),
        writes(b.store, range(60, 120)),
        *(a.store.put(key(rank, namespace="other"), info()) for rank in range(20)),
    )
    for own in (through_a, through_b):
        assert isinstance(own, list)
        assert all(later > earlier for earlier, later in itertools.pairwise(own))
    latest = await a.store.version("default")
    puts = await asyncio.gather(*(a.store.put(key(rank), info()) for rank in range(30)))
    assert sorted(record.version for record in puts) == list(range(latest + 1, latest + 31))
    others = sorted(record.version for record in in_other if isinstance(record, Record))
    assert others == list(range(others[0], others[0] + 20)), "the other namespace has its own counter"


async def test_same_versions_limits_and_floor_as_the_memory_store(redis_server: RedisServer) -> None:
    """A random run of puts and deletes gives the same versions, refusals and contents as the memory store (Tables)."""
    limits = StoreLimits(max_ranks=3, max_namespaces=2)
    memory = MemoryStore(limits)
    redis = RedisStore(redis_server.url, limits=limits, **FAST)  # type: ignore[arg-type]
    await memory.open(Recorder())
    await redis.open(Recorder())
    try:
        pick = random.Random(8)
        for step in range(400):
            chosen = key(
                pick.randrange(5),
                namespace=pick.choice(["a", "b", "c"]),
                role=pick.choice(["target", "draft"]),
            )
            deleting = pick.random() < 0.45
            results: list[Any] = []
            for store in (memory, redis):
                try:
                    if deleting:
                        removed = await store.delete(chosen)
                        results.append(None if removed is None else (removed.version, removed.value))
                    else:
                        record = await store.put(chosen, {"step": step})
                        results.append(record.version)
                except (TooManyRanks, TooManyNamespaces) as exc:
                    results.append(type(exc).__name__)
            assert results[0] == results[1], f"step {step}: {'delete' if deleting else 'put'} {chosen}"
            for namespace in ("a", "b", "c", "never"):
                assert await memory.version(namespace) == await redis.version(namespace), f"step {step}"
        assert await memory.namespaces() == await redis.namespaces()
        for namespace in ("a", "b", "c"):
            for role in ("target", "draft"):
                mine = await memory.records(namespace, TRANSFER_ENGINE_INFO, role)
                theirs = await redis.records(namespace, TRANSFER_ENGINE_INFO, role)
                assert [(r.key, r.value, r.version) for r in mine] == [
                    (r.key, r.value, r.version) for r in theirs
                ]
    finally:
        await redis.close()
        await memory.close()


async def test_a_namespace_emptied_and_reused_never_repeats_a_version(pair: tuple[Replica, Replica]) -> None:
    """The floor: an emptied namespace is forgotten, and its versions never come back, there or elsewhere."""
    a, b = pair
    for rank in range(3):
        await a.store.put(key(rank, namespace="job"), info())
    for rank in range(3):
        await b.store.delete(key(rank, namespace="job"))
    assert await a.store.namespaces() == []
    assert await a.store.version("job") == 6
    assert (await b.store.put(key(0, namespace="job"), info())).version == 7
    assert (await a.store.put(key(0, namespace="fresh"), info())).version == 7
    assert await a.store.version("never-used") == 6


async def test_rank_cap_is_exact_under_concurrent_new_ranks_through_both(redis_server: RedisServer) -> None:
    """max_ranks holds across replicas: of 40 new ranks racing through A and B, exactly the cap get in."""
    limits = StoreLimits(max_ranks=7)
    a = await opened(redis_server.url, limits=limits)
    b = await opened(redis_server.url, limits=limits)
    try:
        await a.store.put(key(0), info())
        outcomes = await asyncio.gather(
            *((a if rank % 2 else b).store.put(key(rank), info()) for rank in range(1, 41)),
            return_exceptions=True,
        )
        stored = [outcome for outcome in outcomes if isinstance(outcome, Record)]
        refused = [outcome for outcome in outcomes if isinstance(outcome, TooManyRanks)]
        assert (len(stored), len(refused)) == (6, 34)
        assert "7 distinct ranks" in refused[0].detail
        assert len(await a.store.records("default", TRANSFER_ENGINE_INFO, "target")) == 7
        # A replacement needs no room, and each role has its own cap.
        await b.store.put(key(0), info("again"))
        await b.store.put(key(99, role="draft"), info())
    finally:
        await a.store.close()
        await b.store.close()


async def test_namespace_cap_is_exact_under_concurrent_new_namespaces(redis_server: RedisServer) -> None:
    """max_namespaces holds across replicas, and a namespace emptied frees its place."""
    limits = StoreLimits(max_namespaces=3)
    a = await opened(redis_server.url, limits=limits)
    b = await opened(redis_server.url, limits=limits)
    try:
        outcomes = await asyncio.gather(
            *((a if n % 2 else b).store.put(key(0, namespace=f"ns{n}"), info()) for n in range(12)),
            return_exceptions=True,
        )
        assert sum(isinstance(outcome, Record) for outcome in outcomes) == 3
        assert sum(isinstance(outcome, TooManyNamespaces) for outcome in outcomes) == 9
        held = await a.store.namespaces()
        assert len(held) == 3
        await a.store.put(key(5, namespace=held[0]), info())  # room inside a held namespace
        with pytest.raises(TooManyNamespaces):
            await b.store.put(key(0, namespace="late"), info())
        for rank in (0, 5):
            await b.store.delete(key(rank, namespace=held[0]))
        await b.store.put(key(0, namespace="late"), info())
    finally:
        await a.store.close()
        await b.store.close()


# -- the feed -------------------------------------------------------------------


async def test_a_change_through_a_is_heard_on_b_and_once_on_a(pair: tuple[Replica, Replica]) -> None:
    """B's feed hears A's put and delete (no value); A hears its own change once, with the record."""
    a, b = pair
    record = await a.store.put(key(2), info())
    assert a.heard.about(key(2)) == [Change(key(2), record.version, record)], "announced before put returns"
    await b.heard.until(lambda: b.heard.heard(key(2), record.version))
    assert b.heard.about(key(2)) == [Change(key(2), record.version)]

    removed = await a.store.delete(key(2))
    assert removed == record
    await b.heard.until(lambda: len(b.heard.about(key(2))) == 2)
    assert b.heard.about(key(2))[1] == Change(key(2), record.version + 1, deleted=True)

    # A's reader has passed both entries once B's next write reaches it: still one of each on A.
    marker = await b.store.put(key(50), info())
    await a.heard.until(lambda: a.heard.heard(key(50), marker.version))
    assert [(c.version, c.deleted, c.record is not None) for c in a.heard.about(key(2))] == [
        (record.version, False, True),
        (record.version + 1, True, False),
    ]
    assert a.heard.resyncs == b.heard.resyncs == 0


async def test_racing_writes_to_one_key_are_all_heard(pair: tuple[Replica, Replica]) -> None:
    """Concurrent puts of one key through both replicas: each replica hears every version, none lost."""
    a, b = pair
    records = await asyncio.gather(*((a if n % 2 else b).store.put(key(1), info(str(n))) for n in range(30)))
    versions = {record.version for record in records}
    for recorder in (a.heard, b.heard):
        await recorder.until(partial(lambda r: versions <= {c.version for c in r.about(key(1))}, recorder))


async def test_prefixes_keep_registries_apart(redis_server: RedisServer) -> None:
    """Two prefixes on one Redis share nothing: records, versions, feed, incarnation."""
    one = await opened(redis_server.url, prefix="one")
    two = await opened(redis_server.url, prefix="two")
    try:
        await one.store.put(key(0), info())
        await one.store.put(key(1), info())
        assert await two.store.get(key(0)) is None
        assert await two.store.namespaces() == []
        assert (await two.store.put(key(0), info())).version == 1
        assert one.store.incarnation != two.store.incarnation
        await one.heard.until(lambda: len(one.heard.changes) == 2)
        marker = await two.store.put(key(7), info())
        await two.heard.until(lambda: two.heard.heard(key(7), marker.version))
        assert not one.heard.heard(key(7), marker.version)
        assert all(change.key.rank != 1 for change in two.heard.changes)
    finally:
        await one.store.close()
        await two.store.close()


# -- the incarnation ------------------------------------------------------------


async def test_incarnation_is_shared_and_survives_a_restart_with_aof(
    redis_server: RedisServer, pair: tuple[Replica, Replica]
) -> None:
    """Both replicas name the same incarnation; a Redis restarted with its AOF keeps it."""
    a, b = pair
    await a.store.put(key(0), info())
    before = a.store.incarnation
    assert before
    assert before == b.store.incarnation
    redis_server.kill()
    redis_server.start()
    await a.heard.until(lambda: a.heard.resyncs > 0)
    record = await b.store.put(key(1), info())
    await a.heard.until(lambda: a.heard.heard(key(1), record.version))
    assert a.store.incarnation == b.store.incarnation == before
    assert record.version == 2


async def test_flushall_changes_the_incarnation_and_resyncs(
    redis_server: RedisServer, pair: tuple[Replica, Replica]
) -> None:
    """FLUSHALL: a new incarnation on every replica, a resync announced, and the feed goes on."""
    a, b = pair
    await a.store.put(key(0), info())
    before = a.store.incarnation
    redis_server.flushall()
    for recorder in (a.heard, b.heard):
        await recorder.until(recorder.resynced)
    assert a.store.incarnation == b.store.incarnation != before
    assert await b.store.get(key(0)) is None
    record = await b.store.put(key(0), info())
    await a.heard.until(lambda: a.heard.heard(key(0), record.version))


async def test_a_read_of_a_flushed_redis_is_never_absent_under_the_old_incarnation(
    redis_server: RedisServer,
) -> None:
    """The first reads after FLUSHALL, long before the watcher's next look (a minute): no "absent" under
    the old incarnation. A read finding no incarnation is a 503 saying why, and wakes the watcher, which
    makes a new one at once; then absence is proven, under the new incarnation."""
    a = await opened(redis_server.url, poll_interval=60.0)
    try:
        await a.store.put(key(0), info())
        before = a.store.incarnation
        redis_server.flushall()
        with pytest.raises(StoreUnavailable, match="holds none of this registry's data"):
            await a.store.get(key(0))
        await a.heard.until(lambda: a.store.incarnation != before)
        assert await a.store.get(key(0)) is None
        assert await a.store.records("default", TRANSFER_ENGINE_INFO, "target") == []
        redis_server.command("SET", "{aiobootstrap}:incarnation", "made-elsewhere")
        assert await a.store.get_many([key(0)]) == [None]
        assert a.store.incarnation == "made-elsewhere"  # the reply's own, at once
        redis_server.command("SET", "{aiobootstrap}:incarnation", "and-again")
        assert await a.store.count("default", TRANSFER_ENGINE_INFO, "target") == 0  # a read of its own, too
        assert a.store.incarnation == "and-again"
    finally:
        await a.store.close()


# -- faults ---------------------------------------------------------------------


async def test_killed_redis_fails_every_call_promptly_then_recovers(
    redis_server: RedisServer, pair: tuple[Replica, Replica]
) -> None:
    """Redis SIGKILLed: every method raises StoreUnavailable (one sentence, retry_after), no hang; restarted: all resumes."""
    a, b = pair
    await a.store.put(key(0), info())
    redis_server.kill()
    calls = [
        lambda: a.store.put(key(1), info()),
        lambda: a.store.delete(key(0)),
        lambda: a.store.get(key(0)),
        lambda: a.store.get_many([key(0), key(1)]),
        lambda: a.store.records("default", TRANSFER_ENGINE_INFO, "target"),
        lambda: a.store.version("default"),
        lambda: a.store.namespaces(),
        lambda: a.store.ping(),
    ]
    for call in calls:
        async with asyncio.timeout(GUARD):
            with pytest.raises(StoreUnavailable) as raised:
                await call()
        detail = raised.value.detail
        assert redis_server.url.removesuffix("/0") in detail
        assert "\n" not in detail
        assert raised.value.retry_after > 0

    redis_server.start()
    async with asyncio.timeout(GUARD):
        while True:  # the store reconnects by itself; the test asks until it answers
            try:
                await b.store.ping()
                break
            except StoreUnavailable:
                await asyncio.sleep(0.01)
    for recorder in (a.heard, b.heard):
        await recorder.until(recorder.resynced)
    assert (await a.store.get(key(0))) is not None, "AOF always kept the acknowledged put"
    record = await b.store.put(key(1), info())
    await a.heard.until(lambda: a.heard.heard(key(1), record.version))


async def test_feed_connections_killed_with_a_write_in_the_gap_miss_no_wake(
    redis_server: RedisServer, pair: tuple[Replica, Replica]
) -> None:
    """CLIENT KILL of every replica's feed connection, a put landing before they reconnect: A still hears it."""
    a, b = pair
    # Both readers connected: each has heard the other's write.
    warm_a, warm_b = await a.store.put(key(10), info()), await b.store.put(key(0), info())
    await a.heard.until(lambda: a.heard.heard(key(0), warm_b.version))
    await b.heard.until(lambda: b.heard.heard(key(10), warm_a.version))
    assert redis_server.kill_clients("aiobootstrap.feed") == 2
    record = await b.store.put(
        key(1), info()
    )  # the readers reconnect after a 50 ms pause: this is in the gap
    await a.heard.until(lambda: a.heard.heard(key(1), record.version))
    await a.heard.until(lambda: a.heard.resyncs > 0)  # the reconnect is announced as well


async def test_reads_survive_their_pooled_connections_being_killed(
    redis_server: RedisServer, pair: tuple[Replica, Replica]
) -> None:
    """CLIENT KILL of the pooled connections: the next read is asked again on a fresh one, not a 503."""
    a, b = pair
    record = await b.store.put(key(0), info())
    assert await a.store.get(key(0)) == record
    # One pooled connection each, or one more while a lease reaper's look overlapped a call.
    assert redis_server.kill_clients("aiobootstrap.calls") >= 2
    assert await a.store.get(key(0)) == record
    assert await a.store.get_many([key(0)]) == [record]


async def test_a_paused_redis_times_out_then_catches_up(
    redis_server: RedisServer, pair: tuple[Replica, Replica]
) -> None:
    """Redis SIGSTOPped: calls raise StoreUnavailable within their deadline; SIGCONT: the feed catches up."""
    a, b = pair
    redis_server.pause()
    try:
        async with asyncio.timeout(GUARD):
            with pytest.raises(StoreUnavailable, match="did not answer within"):
                await a.store.get(key(0))
    finally:
        redis_server.resume()
    record = await b.store.put(key(4), info())
    await a.heard.until(lambda: a.heard.heard(key(4), record.version))


def pause_reader(replica: Replica) -> asyncio.Event:
    """Hold the replica's feed reader before its next XREAD, until the returned event is set.

    (A stand-in for a replica whose loop was stopped: the store under test
    has nothing else to pause.)
    """
    gate = asyncio.Event()
    client = replica.store._connection.feed_client
    assert client is not None
    original = client.xread

    async def held(*args: Any, **kwargs: Any) -> Any:
        await gate.wait()
        return await original(*args, **kwargs)

    client.xread = held  # type: ignore[method-assign]
    return gate


async def test_a_paused_reader_catches_up_in_order(redis_server: RedisServer) -> None:
    """A reader held while B writes 50 changes hears all 50, in order, without a resync."""
    a = await opened(redis_server.url, poll_interval=30.0)
    b = await opened(redis_server.url)
    try:
        gate = pause_reader(a)
        written = [await b.store.put(key(rank), info()) for rank in range(50)]
        gate.set()
        await a.heard.until(lambda: len(a.heard.changes) >= 50)
        assert [c.version for c in a.heard.changes] == [record.version for record in written]
        assert a.heard.resyncs == 0
    finally:
        await a.store.close()
        await b.store.close()


async def test_a_trimmed_feed_is_a_resync(redis_server: RedisServer) -> None:
    """Entries trimmed past a reader's position are seen as a gap: the listener is told to resync."""
    a = await opened(redis_server.url, poll_interval=30.0)
    b = await opened(redis_server.url)
    try:
        gate = pause_reader(a)
        for rank in range(20):
            await b.store.put(key(rank), info())
        redis_server.command("XTRIM", "{aiobootstrap}:feed", "MAXLEN", "2")
        gate.set()
        await a.heard.until(lambda: a.heard.resyncs > 0)
        record = await b.store.put(key(99), info())
        await a.heard.until(lambda: a.heard.heard(key(99), record.version))
    finally:
        await a.store.close()
        await b.store.close()


async def test_a_dead_reader_is_caught_by_the_watcher(pair: tuple[Replica, Replica]) -> None:
    """The backstop: a reader that stops reading (stuck, crashed) is restarted with a resync, and hears again."""
    a, b = pair
    reader = a.store._feed.reader
    assert reader is not None
    reader.cancel()
    record = await b.store.put(key(3), info())
    await a.heard.until(lambda: a.heard.resyncs > 0)
    later = await b.store.put(key(4), info())
    await a.heard.until(lambda: a.heard.heard(key(4), later.version))
    assert record.version < later.version


async def test_no_acknowledged_put_is_lost_when_redis_is_killed_in_a_storm(
    redis_server: RedisServer, pair: tuple[Replica, Replica]
) -> None:
    """SIGKILL in the middle of puts through both replicas: every put that returned is there after restart."""
    a, b = pair
    acknowledged: list[Record] = []
    enough = asyncio.Event()

    async def storm(store: Store, first: int) -> None:
        rank = first
        while True:
            try:
                acknowledged.append(await store.put(key(rank), info(str(rank))))
            except StoreUnavailable:
                return
            if len(acknowledged) >= 150:
                enough.set()
            rank += 8

    tasks = [asyncio.create_task(storm(store, first)) for first, store in enumerate([a.store, b.store] * 4)]
    async with asyncio.timeout(GUARD):
        await enough.wait()
    redis_server.kill()
    async with asyncio.timeout(GUARD):
        await asyncio.gather(*tasks)
    redis_server.start()
    async with asyncio.timeout(GUARD):
        while True:
            try:
                found = await a.store.get_many([record.key for record in acknowledged])
                break
            except StoreUnavailable:
                await asyncio.sleep(0.01)
    assert found == acknowledged


async def test_reads_of_one_loop_turn_share_a_round_trip_and_keep_their_answers(
    pair: tuple[Replica, Replica],
) -> None:
    """Coalesced reads: concurrent gets and get_manys over several tables each get exactly their own answer."""
    a, b = pair
    stored = {
        k: await b.store.put(k, info(str(k)))
        for k in [
            key(0),
            key(1),
            key(0, role="draft"),
            key(2, namespace="ns2"),
            key(3, kind="parallelism_config"),
        ]
    }
    asked = [*stored, key(9), key(9, role="draft"), key(0, namespace="empty")]
    singles, many, cancelled = await asyncio.gather(
        asyncio.gather(*(a.store.get(k) for k in asked)),
        asyncio.gather(*(a.store.get_many(list(reversed(asked))) for _ in range(3))),
        _cancel_soon(a.store.get(key(0))),
    )
    expected = [stored.get(k) for k in asked]
    assert singles == expected
    assert all(reply == list(reversed(expected)) for reply in many)
    assert cancelled
    assert await a.store.get(key(1)) == stored[key(1)], "a cancelled read leaves the batch machinery sound"


async def _cancel_soon(awaitable: Any) -> bool:
    task = asyncio.ensure_future(awaitable)
    await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return True
    return False


async def test_writes_of_one_loop_turn_survive_a_script_flush_and_run_once(
    redis_server: RedisServer, pair: tuple[Replica, Replica]
) -> None:
    """Coalesced writes after SCRIPT FLUSH (NOSCRIPT): each is sent again alone, and runs exactly once."""
    a, _ = pair
    await a.store.put(key(0), info())
    redis_server.command("SCRIPT", "FLUSH")
    records = await asyncio.gather(*(a.store.put(key(rank), info()) for rank in range(1, 21)))
    assert sorted(record.version for record in records) == list(range(2, 22))
    assert await a.store.version("default") == 21
    assert await a.store.delete(key(1)) == records[0]
    # The other scripts' retries too (a delete, a lease's grant), with a batch of writes in flight.
    redis_server.command("SCRIPT", "FLUSH")
    async with asyncio.timeout(GUARD):
        deleted, lease = await asyncio.gather(a.store.delete(key(2)), a.store.grant_lease("default", 30))
    assert deleted == records[1]
    assert (await a.store.read_lease("default", lease.id)).id == lease.id


async def test_a_put_redis_cannot_name_fails_alone_among_the_puts_of_its_loop_turn(
    pair: tuple[Replica, Replica],
) -> None:
    """A put whose key cannot be encoded (a lone surrogate in its role) among good ones: they land, it raises."""
    a, b = pair
    bad = key(0, role="\ud800")
    good = [key(rank) for rank in range(1, 5)]
    async with asyncio.timeout(GUARD):
        outcomes = await asyncio.gather(
            *(a.store.put(k, info()) for k in [good[0], bad, *good[1:]]), return_exceptions=True
        )
    assert isinstance(outcomes[1], ValueError)
    assert "Redis cannot name it" in str(outcomes[1])
    stored = [outcome for index, outcome in enumerate(outcomes) if index != 1]
    assert all(isinstance(outcome, Record) for outcome in stored), outcomes
    assert await b.store.get_many(good) == stored
    with pytest.raises(ValueError, match="Redis cannot name it"):
        await a.store.get(bad)


async def test_whatever_a_batch_raises_every_call_of_it_hears(
    pair: tuple[Replica, Replica], caplog: pytest.LogCaptureFixture
) -> None:
    """A pipeline that raises what is no Redis error (redis-py cannot encode a command): each read hears it, none hangs.

    The batch task ends cleanly (no "Task exception was never retrieved"), and
    the next loop turn's batch is answered as usual.
    """
    a, _ = pair
    record = await a.store.put(key(0), info())
    reads = a.store._reads
    async with asyncio.timeout(GUARD):
        table = a.store._keys.table(key(0))
        outcomes = await asyncio.gather(
            a.store._ranks.fetch(table, ["0"]),
            reads.submit(lambda _, pipe: pipe.hmget("\ud800", ["0"])),
            a.store._ranks.fetch(table, ["1"]),
            return_exceptions=True,
        )
        assert all(isinstance(outcome, UnicodeEncodeError) for outcome in outcomes), outcomes
        assert not reads.tasks
        assert await a.store.get(key(0)) == record
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_a_busy_pool_waits_instead_of_failing(redis_server: RedisServer) -> None:
    """More concurrent calls than pooled connections: all answered, none reported as an unreachable store."""
    replica = await opened(redis_server.url, max_connections=2, timeout=GUARD)
    try:
        await replica.store.put(key(0), info())
        results = await asyncio.gather(*(replica.store.get(key(0)) for _ in range(300)))
        assert all(result is not None for result in results)
    finally:
        await replica.store.close()


# -- opening, URLs, durability --------------------------------------------------


async def test_a_unix_socket_url_reaches_the_same_registry(redis_server: RedisServer) -> None:
    """unix:///path?db=N: the store works over a Unix socket, and db 0 over TCP sees the same data."""
    if redis_server.unix_socket is None:
        pytest.skip("the temporary directory is too deep for a Unix socket's path")
    over_tcp = await opened(redis_server.url)
    over_unix = await opened(f"unix://{redis_server.unix_socket}?db=0")
    other_db = await opened(f"unix://{redis_server.unix_socket}?db=2")
    try:
        record = await over_unix.store.put(key(0), info())
        assert await over_tcp.store.get(key(0)) == record
        assert await other_db.store.get(key(0)) is None
        await over_tcp.heard.until(lambda: over_tcp.heard.heard(key(0), record.version))
    finally:
        for replica in (over_tcp, over_unix, other_db):
            await replica.store.close()


async def test_a_rediss_url_speaks_tls(tmp_path: Path) -> None:
    """rediss://: the store verifies the server's certificate (a CA named in the URL) and works over TLS."""
    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert_path, key_path, ca_path = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert_path.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    cert.private_key_pem.write_to_path(str(key_path))
    ca.cert_pem.write_to_path(str(ca_path))
    server = RedisServer(tmp_path, tls=(str(cert_path), str(key_path), str(ca_path)))
    server.start()
    try:
        # A TLS open is several handshakes (the pool's connection, the feed's): on a loaded machine more
        # than FAST's 1 s, which failed the first make test of a fresh clone (issue 41, item 12). Its
        # patience is the test's; the refusal below is still quick.
        replica = await opened(
            f"rediss://127.0.0.1:{server.port}/0?ssl_ca_certs={ca_path}", open_timeout=GUARD
        )
        try:
            record = await replica.store.put(key(0), info())
            assert await replica.store.get(key(0)) == record
        finally:
            await replica.store.close()
        untrusting = RedisStore(f"rediss://127.0.0.1:{server.port}/0", timeout=0.5, open_timeout=0.3)
        with pytest.raises(StoreUnavailable, match="unreachable"):
            await untrusting.open(Recorder())
    finally:
        server.stop()


async def test_open_gives_up_on_an_unreachable_redis_with_one_line() -> None:
    """Nothing listening: open retries briefly, then raises StoreUnavailable naming the URL, in one line."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    store = RedisStore(url, timeout=0.2, open_timeout=0.3)
    async with asyncio.timeout(GUARD):
        with pytest.raises(StoreUnavailable) as raised:
            await store.open(Recorder())
    assert url in raised.value.detail
    assert "unreachable" in raised.value.detail
    assert "\n" not in raised.value.detail
    assert raised.value.detail.count(url) == 1, "the URL is named once, not repeated by the last failure"
    with pytest.raises(StoreUnavailable):
        await store.get(key(0))


async def test_close_lets_writes_already_sent_finish(pair: tuple[Replica, Replica]) -> None:
    """Closing with puts under way: each returns its record (and is stored) or raises StoreUnavailable; none hangs."""
    a, b = pair
    puts = [asyncio.ensure_future(a.store.put(key(rank), info())) for rank in range(20)]
    await asyncio.sleep(0)  # one loop turn: the puts are queued and their batch is sent
    await a.store.close()
    async with asyncio.timeout(GUARD):
        outcomes = await asyncio.gather(*puts, return_exceptions=True)
    assert all(isinstance(outcome, Record | StoreUnavailable) for outcome in outcomes)
    stored = [outcome for outcome in outcomes if isinstance(outcome, Record)]
    assert stored, "a batch already sent is answered"
    assert await b.store.get_many([record.key for record in stored]) == stored


async def test_closed_store_raises_store_unavailable(pair: tuple[Replica, Replica]) -> None:
    """After close, a call is a StoreUnavailable, not a redis-py error."""
    a, _ = pair
    await a.store.close()
    with pytest.raises(StoreUnavailable):
        await a.store.get(key(0))


async def test_warns_once_when_redis_can_lose_acknowledged_writes(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """appendfsync everysec and an allkeys- eviction policy: one WARNING line at open naming both."""
    redis_server.command("CONFIG", "SET", "appendfsync", "everysec")
    redis_server.command("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    with caplog.at_level(logging.INFO, logger="aiobootstrap"):
        replica = await opened(redis_server.url)
        await replica.store.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "appendfsync is everysec" in message
    assert "allkeys-lru" in message
    assert "\n" not in message


async def test_no_warning_with_aof_always_and_a_redis_refusing_config_is_not_an_error(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """AOF always: no warning. A user without CONFIG (as managed services do): an info line, and the store works."""
    with caplog.at_level(logging.INFO, logger="aiobootstrap"):
        replica = await opened(redis_server.url)
        await replica.store.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    redis_server.command("ACL", "SETUSER", "app", "on", ">secret", "~*", "&*", "+@all", "-config")
    url = f"redis://app:secret@127.0.0.1:{redis_server.port}/0"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="aiobootstrap"):
        replica = await opened(url)
    try:
        assert replica.store.description == f"redis://app:***@127.0.0.1:{redis_server.port}/0"
        lines = [r.getMessage() for r in caplog.records]
        assert any("Cannot check how durable" in line for line in lines)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert all("secret" not in line for line in lines)
        assert (await replica.store.put(key(0), info())).version == 1
    finally:
        await replica.store.close()


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("memory:", MemoryStore),
        ("redis://127.0.0.1:7777/2", RedisStore),
        ("redis://user:pw@127.0.0.1", RedisStore),
        ("rediss://redis.example:6380/0", RedisStore),
        ("unix:///run/redis/redis.sock?db=3", RedisStore),
    ],
)
def test_open_store_knows_each_scheme(url: str, kind: type[Store]) -> None:
    """open_store maps each scheme of SPEC section 8 to its store, without connecting."""
    assert isinstance(open_store(url, prefix="aiobootstrap", limits=StoreLimits()), kind)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "no scheme"),
        ("localhost:7000", "unknown scheme"),
        ("ftp://host/x", "unknown scheme"),
        ("memory:x", "memory: takes nothing"),
        ("file:", "names no file"),
        ("redis://", "names no host"),
        ("redis://127.0.0.1:notaport/0", "malformed"),
        ("redis://127.0.0.1/abc", "a database is a number"),
        ("unix://", "malformed"),
        ("unix:///x.sock?db=one", "a database is a number"),
    ],
)
def test_open_store_refuses_a_bad_url_in_one_line(url: str, says: str) -> None:
    """A malformed URL or an unknown scheme is a ValueError with one line (the CLI's exit 2)."""
    with pytest.raises(ValueError, match=says) as raised:
        open_store(url, prefix="aiobootstrap", limits=StoreLimits())
    assert "\n" not in str(raised.value)


def test_open_store_refuses_a_bad_prefix() -> None:
    """The prefix sits in a hash tag: braces and colons are refused."""
    for prefix in ("", "a}b", "a:b", "-x"):
        with pytest.raises(ValueError, match="prefix"):
            open_store("redis://127.0.0.1/0", prefix=prefix, limits=StoreLimits())


def test_describe_hides_the_password() -> None:
    """Logs name the store without its password."""
    assert describe("redis://user:hunter2@db.example:6380/1") == "redis://user:***@db.example:6380/1"
    assert describe("rediss://:hunter2@db.example") == "rediss://:***@db.example"
    assert describe("redis://db.example:6380/1") == "redis://db.example:6380/1"
    assert (
        describe("unix:///run/redis.sock?db=2&password=hunter2") == "unix:///run/redis.sock?db=2&password=***"
    )
    assert describe("memory:") == "memory:"
    assert "hunter2" not in describe("redis://user:hunter2@[::1/0")


def test_without_the_redis_extra_the_package_imports_and_a_redis_url_says_what_to_install() -> None:
    """No redis-py: aiobootstrap and the memory store work; a redis:// URL is one line naming the extra."""
    script = (
        "import sys; sys.modules['redis'] = None\n"
        "import aiobootstrap, aiobootstrap.store\n"
        "from aiobootstrap.store import open_store\n"
        "open_store('memory:')\n"
        "try:\n"
        "    open_store('redis://127.0.0.1/0')\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == (
        "The store URL redis://127.0.0.1/0 needs the redis extra: pip install 'aiobootstrap[redis]'."
    )
