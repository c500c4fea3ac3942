"""Leases on the Redis store: two replicas over one real redis-server, each with its own reaper.

Store tests grant leases of a few tenths of a second (the routes take 1 s at
least) and await what expiry does; the HTTP tests drive two apps over one
Redis. Nothing sleeps to let things settle.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._names import ENCODER_URLS, PARALLELISM_CONFIG
from aiobootstrap.core.registry import Registry
from aiobootstrap.exceptions import LeaseNotFound, StoreUnavailable, TooManyLeases
from aiobootstrap.store import StoreLimits
from aiobootstrap.store.redis import RedisStore
from testbed.redis_server import RedisServer

from .helpers.leases import INFO, config_key, lease_every_kind, urls_key
from .helpers.registry import info_key, open_registry, registration
from .helpers.waits import GUARD, until
from .stall_proxy import StallProxy

FAST = {"timeout": 5.0, "open_timeout": 1.0, "poll_interval": 0.1}
TINY = 0.3
REGISTER = "/register_transfer_engine_info"


@pytest.fixture
async def pair(redis_server: RedisServer) -> AsyncIterator[tuple[Registry, Registry]]:
    """Two registries, A and B, each over its own RedisStore on one Redis."""
    limits = StoreLimits(max_leases=4)
    a = await open_registry(RedisStore(redis_server.url, limits=limits, **FAST))  # type: ignore[arg-type]
    b = await open_registry(RedisStore(redis_server.url, limits=limits, **FAST))  # type: ignore[arg-type]
    try:
        yield a, b
    finally:
        await a.store.close()
        await b.store.close()


def _feed(redis_server: RedisServer) -> list[dict[str, str]]:
    """Every change on the Redis feed, oldest first (fields as the scripts write them)."""
    entries: Any = redis_server.command("XRANGE", "{aiobootstrap}:feed", "-", "+")
    return [dict(fields) for _, fields in entries]


async def test_expiry_deletes_every_kind_once_and_wakes_a_waiter_on_the_other_replica(
    pair: tuple[Registry, Registry], redis_server: RedisServer
) -> None:
    """Records of every kind on a lease through A; B's waiter is woken; each record has one deletion version."""
    a, b = pair
    # Long enough for the four writes on a loaded machine (a 0.3 s lease expired before the third).
    ttl = 1.0
    lease = await a.store.grant_lease("default", ttl)
    started = time.monotonic()
    listed = await lease_every_kind(a, lease.id)
    async with asyncio.timeout(GUARD):
        woken = await b.wait(urls_key(), GUARD, after=listed.version + 1)
    assert woken is not None
    assert woken.value == {"members": ["http://kept"]}
    await until(lambda: sum((r.store.lease_figures() or (0, 0, 0))[1] for r in pair) == 1)
    assert time.monotonic() - started < ttl + 1.0
    assert await b.store.get(info_key(0)) is None
    assert await b.store.get(config_key(0)) is None
    # Four writes, then three deletions: each record ended once, with a version of its own.
    feed = _feed(redis_server)
    assert [entry["v"] for entry in feed[4:]] == ["5", "6", "7"]
    assert {(entry["k"], entry["o"]) for entry in feed[4:]} == {
        ("transfer_engine_info", "del"),
        (PARALLELISM_CONFIG, "del"),
        (ENCODER_URLS, "put"),
    }
    assert len(feed) == 7
    assert await a.store.version("default") == 7
    for registry in pair:
        with pytest.raises(LeaseNotFound):
            await registry.store.read_lease("default", lease.id)


async def test_keepalive_through_the_other_replica_keeps_a_lease_past_its_ttl(
    pair: tuple[Registry, Registry],
) -> None:
    """Granted through A, kept alive through B past several TTLs: the record stays; read through either."""
    a, b = pair
    # Kept alive every tenth of a TTL long enough to matter on a loaded machine (a 0.3 s lease kept
    # every 75 ms expired when a worker stalled), for twice the TTL.
    ttl = 1.0
    lease = await a.store.grant_lease("default", ttl)
    await a.register(info_key(0), INFO, lease.id)
    deadline = time.monotonic() + 2 * ttl
    while time.monotonic() < deadline:
        kept = await b.store.keepalive_lease("default", lease.id)
        assert kept.ttl == ttl
        await asyncio.sleep(ttl / 10)  # a holder's keepalive period, not a settle
    state = await a.store.read_lease("default", lease.id)
    assert state.records == ((info_key(0), None),)
    assert 0 < state.remaining <= ttl
    assert await b.store.get(info_key(0)) is not None
    revoked = await b.store.revoke_lease("default", lease.id)
    assert revoked.records == ((info_key(0), None),)
    assert await a.store.get(info_key(0)) is None
    with pytest.raises(LeaseNotFound):
        await a.store.keepalive_lease("default", lease.id)


async def test_an_unknown_lease_stores_nothing_and_a_record_moves(pair: tuple[Registry, Registry]) -> None:
    """A put or an add naming no lease raises LeaseNotFound, unchanged; registered again elsewhere, a record moves."""
    a, b = pair
    with pytest.raises(LeaseNotFound):
        await a.store.put(info_key(0), INFO, "nope")
    with pytest.raises(LeaseNotFound):
        await a.store.set_member(urls_key(), "http://e1", present=True, lease="nope")
    assert await a.store.get(info_key(0)) is None
    assert await a.store.get(urls_key()) is None
    assert await a.store.version("default") == 0
    one = await a.store.grant_lease("default", 30)
    two = await b.store.grant_lease("default", 30)
    await a.store.put(info_key(0), INFO, one.id)
    await a.store.set_member(urls_key(), "http://e1", present=True, lease=one.id)
    await b.store.put(info_key(0), INFO, two.id)  # moved to two
    await b.store.set_member(
        urls_key(), "http://e1", present=True, lease=two.id
    )  # listed already: moved, no new version
    assert (await a.store.read_lease("default", one.id)).records == ()
    assert len((await a.store.read_lease("default", two.id)).records) == 2
    await a.store.put(info_key(0), INFO)  # off every lease
    await a.store.set_member(urls_key(), "http://e1", present=True)
    assert (await b.store.read_lease("default", two.id)).records == ()
    await b.store.revoke_lease("default", two.id)
    assert await a.store.get(info_key(0)) is not None
    with pytest.raises(LeaseNotFound):
        await a.store.read_lease("other", one.id)  # leases live in their namespace


async def test_max_leases_is_counted_across_replicas(pair: tuple[Registry, Registry]) -> None:
    """Four leases allowed: two granted through A and two through B fill it, for both (in four namespaces:
    one holds at most its share, test_lease_share.py)."""
    a, b = pair
    await a.store.grant_lease("default", 30)
    await a.store.grant_lease("blue", 30)
    await b.store.grant_lease("green", 30)
    await b.store.grant_lease("red", 30)
    for registry in pair:
        with pytest.raises(TooManyLeases, match="--max-leases"):
            await registry.store.grant_lease("white", 30)


async def test_a_redis_restart_with_aof_keeps_leases_and_their_records(
    redis_server: RedisServer,
) -> None:
    """Redis restarted (AOF): the lease and its record are back, and keepalive goes on."""
    store = RedisStore(redis_server.url, **FAST)  # type: ignore[arg-type]
    registry = await open_registry(store)
    try:
        lease = await store.grant_lease("default", 30)
        await registry.register(info_key(0), INFO, lease.id)
        redis_server.kill()
        with pytest.raises(StoreUnavailable):
            await store.keepalive_lease("default", lease.id)
        redis_server.start()
        async with asyncio.timeout(GUARD):
            while True:
                try:
                    kept = await store.keepalive_lease("default", lease.id)
                    break
                except StoreUnavailable:  # the pool reconnects on a later call
                    await asyncio.sleep(0.05)
        assert kept.ttl == 30
        assert (await store.read_lease("default", lease.id)).records == ((info_key(0), None),)
        assert store.lease_figures() is not None
    finally:
        await store.close()


async def test_the_lease_routes_over_two_replicas(aiohttp_client: Any, redis_server: RedisServer) -> None:
    """Grant through A; keepalive, read and revoke through B; the record is gone for both."""
    config = ServerConfig(store=redis_server.url)
    a = await aiohttp_client(create_app(config))
    b = await aiohttp_client(create_app(config))
    lease = (await (await a.post("/leases", json={"ttl": 10})).json())["lease"]
    assert (await a.put(REGISTER, json={**registration(0), "lease": lease})).status == 200
    assert await (await b.post(f"/leases/{lease}/keepalive")).json() == {"lease": lease, "ttl": 10}
    read = await (await b.get(f"/leases/{lease}")).json()
    assert len(read["records"]) == 1
    assert (await b.delete(f"/leases/{lease}")).status == 200
    assert (await a.get("/get_transfer_engine_info?rank=0")).status == 404
    assert (await a.get(f"/leases/{lease}")).status == 404
    response = await b.put(REGISTER, json={**registration(1), "lease": lease})
    assert response.status == 404
    assert (await a.get("/get_transfer_engine_info?rank=1")).status == 404


async def test_a_replica_cut_off_expires_nothing_while_the_other_keeps_the_lease_alive(
    redis_server: RedisServer,
) -> None:
    """A's calls stall (a proxy) past several TTLs while B keeps the lease alive: A expires nothing, B reaps later."""
    proxy = StallProxy(redis_server.port)
    await proxy.start()
    stalled = RedisStore(proxy.url, timeout=0.3, open_timeout=1.0, poll_interval=0.2)
    stalled._connection.feed_url = redis_server.url  # the feed goes past the proxy
    a = await open_registry(stalled)
    b = await open_registry(RedisStore(redis_server.url, **FAST))  # type: ignore[arg-type]
    try:
        # A TTL a loaded machine's pauses cannot outlast between two keepalives (0.6 s did, in CI).
        lease = await a.store.grant_lease("default", 1.2)
        await a.register(info_key(0), INFO, lease.id)
        proxy.stall()
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            await b.store.keepalive_lease("default", lease.id)
            await asyncio.sleep(0.15)  # a holder's keepalive period, not a settle
        proxy.heal()
        assert await b.store.get(info_key(0)) is not None
        assert (await a.store.read_lease("default", lease.id)).records == ((info_key(0), None),)
        # Nobody keeps it alive now: it ends once, by either replica.
        await until(lambda: sum((r.store.lease_figures() or (0, 0, 0))[1] for r in (a, b)) == 1)
        assert await b.store.get(info_key(0)) is None
    finally:
        await a.store.close()
        await b.store.close()
        await proxy.close()


async def test_a_storm_of_expiries_past_one_reaper_batch_ends_every_lease_soon_after_its_ttl(
    pair: tuple[Registry, Registry],
) -> None:
    """300 leases due together (more than one look takes): every one ends and its record is gone, within the
    test's patience (how soon after the TTL is bench.leases' figure, not a timed assertion here)."""
    a, b = pair
    for store in (a.store, b.store):
        store._leases._max = -1  # type: ignore[attr-defined]  # the pair's cap is 3
    # A TTL that 300 grants and 300 puts on a loaded machine do not outlast (2 s did once, at -n 6).
    leases = await asyncio.gather(*(a.store.grant_lease("default", 3.0) for _ in range(300)))
    await asyncio.gather(*(a.store.put(info_key(rank), INFO, lease.id) for rank, lease in enumerate(leases)))
    await until(lambda: sum((r.store.lease_figures() or (0, 0, 0))[1] for r in pair) == 300)
    assert await a.store.records("default", "transfer_engine_info", "default") == []


async def test_two_replicas_ending_one_due_lease_at_once_end_it_once(
    pair: tuple[Registry, Registry], redis_server: RedisServer
) -> None:
    """Both replicas run the end of one due lease together (their reapers too): one deletion version, one end."""
    a = pair[0]
    lease = await a.store.grant_lease("default", TINY)
    await a.register(info_key(0), INFO, lease.id)
    await asyncio.sleep(TINY)  # the TTL itself
    ends = [r.store._leases._expire(lease.id) for r in pair for _ in range(3)]  # type: ignore[attr-defined]
    await asyncio.gather(*ends)
    await until(lambda: sum((r.store.lease_figures() or (0, 0, 0))[1] for r in pair) >= 1)
    assert sum((r.store.lease_figures() or (0, 0, 0))[1] for r in pair) == 1
    assert [(entry["o"], entry["v"]) for entry in _feed(redis_server)] == [("put", "1"), ("del", "2")]


async def test_the_listing_on_either_replica_shows_each_record_s_lease(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """A record on a lease through A is listed through B with its lease and remaining time; one on none without."""
    config = ServerConfig(store=redis_server.url)
    a = await aiohttp_client(create_app(config))
    b = await aiohttp_client(create_app(config))
    lease = (await (await a.post("/leases", json={"ttl": 30})).json())["lease"]
    assert (await a.put(REGISTER, json={**registration(0), "lease": lease})).status == 200
    assert (await a.put(REGISTER, json=registration(1))).status == 200
    listed = {item["rank"]: item for item in (await (await b.get("/ranks")).json())["ranks"]}
    assert listed[0]["lease"] == lease
    assert 0 < listed[0]["lease_remaining"] <= 30
    assert listed[0]["lease_ttl"] == 30  # the page's "running out" is half of it
    assert "lease" not in listed[1]
