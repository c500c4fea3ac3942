"""No single Redis: the Sentinel store URL and --store-min-replicas, against real processes.

One deployment (a primary, its replica, three Sentinels with
``down-after-milliseconds`` 1000) serves the module: each failover test
kills the primary with SIGKILL during a storm of registrations through two
aiobootstrap replicas, then heals it (the killed node back as a replica).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import itertools
import logging
import re
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.cli.parser import server_config, server_parser
from aiobootstrap.exceptions import StoreUnavailable
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.store import open_store
from aiobootstrap.store.redis import RedisStore
from aiobootstrap.store.redis.connection import Connection
from testbed.redis_server import RedisServer, free_port
from testbed.sentinel_cluster import SentinelCluster

from .helpers.cli import launch
from .helpers.redis_store import Recorder
from .helpers.registry import registration
from .helpers.waits import GUARD, until
from .sentinel_cluster import cluster as cluster  # the module's deployment

FAILOVER_GUARD = 30.0
"""Seconds a failover and a heal may take before a test fails: generous, never a measurement."""


@pytest.fixture(autouse=True)
def nothing_left_open(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on the deployment (its apps closed first): no Sentinel holds a connection of a store,
    and the garbage collector finds no connection left unclosed."""
    yield
    if "cluster" not in request.fixturenames:
        return
    _assert_nothing_open(request.getfixturevalue("cluster"))


def _assert_nothing_open(cluster: SentinelCluster) -> None:
    # A closed connection leaves the Sentinel's list once it has read the close.
    deadline = time.monotonic() + GUARD
    while left := [name for sentinel in cluster.sentinels for name in sentinel.store_clients()]:
        assert time.monotonic() < deadline, f"connections left open on the Sentinels: {left}"
        time.sleep(0.05)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


async def _replicas(aiohttp_client: Any, config: ServerConfig) -> tuple[Any, Any]:
    kwargs = {"server_kwargs": {"handler_cancellation": True}}
    return (
        await aiohttp_client(create_app(config), **kwargs),
        await aiohttp_client(create_app(config), **kwargs),
    )


async def _wait_promoted(cluster: SentinelCluster, old: RedisServer) -> None:
    """Until the Sentinels name another primary (asked from a thread: the apps keep serving)."""
    async with asyncio.timeout(FAILOVER_GUARD):
        while not await asyncio.to_thread(cluster.promoted, old):  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def _storm_through_a_failover(cluster: SentinelCluster, a: Any, b: Any) -> tuple[dict[int, str], int]:
    """Register new ranks through both replicas while the primary is killed, promoted past and healed.

    The ranks acknowledged (with the info each holds), and how many were refused.
    """
    acknowledged: dict[int, str] = {}
    refused = 0
    ranks = itertools.count()
    stop = asyncio.Event()

    async def worker(replica: Any) -> None:
        nonlocal refused
        while not stop.is_set():
            rank = next(ranks)
            reply = await replica.put(
                "/register_transfer_engine_info", json=registration(rank, f"info-{rank}")
            )
            if reply.status == 200:
                acknowledged[rank] = f"info-{rank}"
            else:
                assert reply.status == 503, await reply.text()
                assert "Retry-After" in reply.headers
                refused += 1
                await asyncio.sleep(0.02)  # a client backs off on 503 (its Retry-After, shortened)

    workers = [asyncio.create_task(worker(replica)) for replica in (a, b) * 4]
    await until(lambda: len(acknowledged) >= 40)
    old = cluster.kill_primary()
    for replica in (a, b):
        ready = await replica.get("/ready")  # no primary yet: Sentinel needs a second to call it down
        assert ready.status == 503
        assert "Retry-After" in ready.headers
    await _wait_promoted(cluster, old)
    before_heal = len(acknowledged)
    await asyncio.to_thread(cluster.heal, FAILOVER_GUARD)
    await until(lambda: len(acknowledged) >= before_heal + 40, FAILOVER_GUARD)
    stop.set()
    await asyncio.gather(*workers)
    return acknowledged, refused


async def _park(replica: Any, rank: int) -> asyncio.Task[Any]:
    parked = replica.app[REGISTRY].parked
    waiting = asyncio.create_task(
        replica.get("/get_transfer_engine_info", params={"rank": str(rank), "wait": str(FAILOVER_GUARD * 2)})
    )
    await until(lambda: replica.app[REGISTRY].parked == parked + 1)
    return waiting


async def _register(replica: Any, rank: int, info: str) -> None:
    """Register until acknowledged, as a client does: a 503 (no primary yet, a replica slow to hold the write
    under load) is asked again; anything else fails the test."""
    async with asyncio.timeout(FAILOVER_GUARD):
        while (
            reply := await replica.put("/register_transfer_engine_info", json=registration(rank, info))
        ).status != 200:
            assert reply.status == 503, await reply.text()
            await asyncio.sleep(0.05)  # a client backs off on 503 (its Retry-After, shortened)


async def _missing(replica: Any, acknowledged: dict[int, str]) -> list[int]:
    """The acknowledged ranks ``replica`` cannot read back with their info (a 503 fails the test)."""
    missing = []
    for rank, info in sorted(acknowledged.items()):
        reply = await replica.get("/get_transfer_engine_info", params={"rank": str(rank)})
        assert reply.status in (200, 404), await reply.text()
        if reply.status == 404 or (await reply.json())["remote_instance_transfer_engine_info"][0] != info:
            missing.append(rank)
    return missing


async def test_with_min_replicas_a_failover_loses_no_acknowledged_registration_and_no_waiter(
    aiohttp_client: Any, cluster: SentinelCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """--store-min-replicas 1, primary SIGKILLed mid-storm: both replicas read every 200 back after the
    failover, under the same boot id, and waits parked before the kill are answered by registrations after."""
    config = ServerConfig(store=cluster.url, store_prefix="with-wait", store_min_replicas=1)
    await asyncio.to_thread(cluster.wait_healthy, FAILOVER_GUARD)  # a test before may have just healed it
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        a, b = await _replicas(aiohttp_client, config)
    # The replica is connected and keeps an AOF (asked directly): only the primary's floor is missing.
    start = [r.getMessage() for r in caplog.records if "cannot keep --store-min-replicas" in r.getMessage()]
    assert len(start) == 2  # one line per aiobootstrap replica
    assert all("min-replicas-to-write is 0" in line for line in start)
    assert not any("replicas are connected" in line or "replica 127.0.0.1" in line for line in start)
    boot = a.app[REGISTRY].store.incarnation
    waits = [await _park(replica, 100_000 + index) for index, replica in enumerate((a, b, a, b))]
    acknowledged, refused = await _storm_through_a_failover(cluster, a, b)
    assert refused > 0  # the kill was felt: the outage answered 503, never 500
    assert not any(wait.done() for wait in waits)
    for index, wait in enumerate(waits):
        through = (b, a)[index % 2]
        rank = 100_000 + index
        await _register(through, rank, f"after-{index}")
        answer = await asyncio.wait_for(wait, GUARD)
        assert answer.status == 200
        assert (await answer.json())["remote_instance_transfer_engine_info"][0] == f"after-{index}"
    for replica in (a, b):
        assert await _missing(replica, acknowledged) == []
        assert (await replica.get("/ready")).status == 200
    # The promoted replica held the data: the incarnation with it.
    assert a.app[REGISTRY].store.incarnation == b.app[REGISTRY].store.incarnation == boot


async def test_without_min_replicas_a_failover_is_measured_not_promised(
    aiohttp_client: Any, cluster: SentinelCluster, record_property: Any
) -> None:
    """No --store-min-replicas: acknowledged registrations a failover loses are counted (recorded, not
    asserted zero: asynchronous replication can lose the last ones); every other one reads back."""
    config = ServerConfig(store=cluster.url, store_prefix="without-wait")
    a, b = await _replicas(aiohttp_client, config)
    acknowledged, refused = await _storm_through_a_failover(cluster, a, b)
    lost = await _missing(a, acknowledged)
    assert await _missing(b, acknowledged) == lost  # one registry, whatever it lost
    record_property("acknowledged", len(acknowledged))
    record_property("lost", len(lost))
    logging.getLogger(__name__).warning(
        "failover without --store-min-replicas: %d of %d acknowledged registrations lost (%d refused)",
        len(lost),
        len(acknowledged),
        refused,
    )


async def test_a_demoted_primary_sends_every_replica_to_the_new_one(
    aiohttp_client: Any, cluster: SentinelCluster
) -> None:
    """SENTINEL FAILOVER (the old primary lives on as a replica): its READONLY replies are at most a 503,
    never a 500, and the next writes land on the new primary through both replicas."""
    config = ServerConfig(store=cluster.url, store_prefix="demoted")
    a, b = await _replicas(aiohttp_client, config)
    for rank, replica in enumerate((a, b)):
        assert (await replica.put("/register_transfer_engine_info", json=registration(rank))).status == 200
    old = cluster.failover()
    await _wait_promoted(cluster, old)
    for replica in (a, b):
        await _register(replica, 7, "after")
        read = await replica.get("/get_transfer_engine_info", params={"rank": "0"})
        assert read.status == 200


async def test_a_store_closed_while_a_call_asks_the_sentinels_leaves_no_connection_open(
    cluster: SentinelCluster,
) -> None:
    """A call that must find the primary again (its connection cut) while the store closes, the Sentinel
    it asks first paused: it moves on to the next Sentinel, and the close waits for it before closing
    anything, so the connection it opens there is closed too (it was left to the garbage collector)."""
    store = open_store(cluster.url, prefix="closing")
    await store.open(Recorder())
    assert isinstance(store, RedisStore)
    sentinel = store._connection._sentinel
    assert sentinel is not None
    first = sentinel.sentinels[0].connection_pool  # the Sentinel redis-py asks first: the last that answered
    assert cluster.primary().kill_clients("closing.calls") == 1
    paused = next(s for s in cluster.sentinels if s.port == first.connection_kwargs["port"])
    paused.pause()
    try:
        ping = asyncio.create_task(store.ping())
        # Until the call waits for the paused Sentinel's answer (redis-py's pool says when).
        await until(lambda: any(c.is_connected for c in first._in_use_connections))
        await store.close()
        assert ping.done()  # the close waited for it
        result = (await asyncio.gather(ping, return_exceptions=True))[0]
        assert result is None or isinstance(result, StoreUnavailable)
    finally:
        paused.resume()
    del store, ping
    _assert_nothing_open(cluster)


async def test_discoveries_at_once_keep_every_sentinel_listed_and_the_close_closes_each() -> None:
    """Two connections ask for the primary at once, both past two Sentinels that fail, to the third: redis-py
    (8.1) swapped it to the head by a position read before it asked, so the second swap listed it twice and
    dropped the one there, never asked again nor closed (its connections outlived the store)."""
    connection = Connection(
        "redis+sentinel://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/registry",
        where="racing",
        prefix="racing",
        timeout=1.0,
        block_seconds=1.0,
        max_connections=2,
    )
    connection.connect()
    sentinel = connection._sentinel
    assert sentinel is not None
    clients = list(sentinel.sentinels)
    answer = asyncio.Event()
    asking: list[object] = []
    primary = {"is_master": True, "is_sdown": False, "is_odown": False, "num-other-sentinels": 2}

    async def masters(client: object, answers: bool) -> dict[str, dict[str, Any]]:
        if not answers:
            raise RedisConnectionError("refused")
        asking.append(client)
        await answer.wait()
        return {"registry": {**primary, "ip": "127.0.0.1", "port": 4}}

    closed: list[object] = []
    for index, client in enumerate(clients):
        client.sentinel_masters = functools.partial(masters, client, index == 2)  # type: ignore[method-assign]
        client.aclose = functools.partial(_record, closed, client)  # type: ignore[method-assign]
    discoveries = [asyncio.create_task(sentinel.discover_master("registry")) for _ in range(2)]
    await until(lambda: len(asking) == 2)
    answer.set()
    assert await asyncio.gather(*discoveries) == [("127.0.0.1", 4)] * 2
    assert sentinel.sentinels[0] is clients[2]
    assert sorted(map(id, sentinel.sentinels)) == sorted(map(id, clients))  # each listed once
    await connection.disconnect()
    assert sorted(map(id, closed)) == sorted(map(id, clients))


async def _record(closed: list[object], client: object) -> None:
    closed.append(client)


async def test_min_replicas_without_a_replica_warns_at_start_and_refuses_writes_with_503(
    aiohttp_client: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """--store-min-replicas 1 over a Redis with no replica: one start WARNING saying so, and a write is a
    503 with Retry-After whose detail says it may or may not be kept; a get still answers."""
    config = ServerConfig(store=redis_server.url, store_min_replicas=1)
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        client = await aiohttp_client(create_app(config))
    warnings = [
        r.getMessage() for r in caplog.records if "cannot keep --store-min-replicas" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert "0 replicas are connected" in warnings[0]
    assert "min-replicas-to-write is 0" in warnings[0]
    reply = await client.put("/register_transfer_engine_info", json=registration(0))
    assert reply.status == 503
    assert "Retry-After" in reply.headers
    detail = (await reply.json())["detail"]
    assert "0 of the 1 replicas" in detail
    assert "may or may not be kept" in detail
    assert (await client.get("/get_transfer_engine_info", params={"rank": "0"})).status in (200, 404)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("redis+sentinel://127.0.0.1:26379", "names no master"),
        ("redis+sentinel:///registry", "names no Sentinel"),
        ("redis+sentinel://127.0.0.1:port/registry", "has the port 'port'"),
        ("redis+sentinel://127.0.0.1:0/registry", "has the port '0'"),
        ("redis+sentinel://127.0.0.1:26379,/registry", "without a host"),
        ("redis+sentinel://[::1/registry", "malformed address"),
        ("redis+sentinel://127.0.0.1/registry?db=one", "a database is a number"),
        ("redis+sentinel://127.0.0.1/registry?sentinel=x", "has the parameter 'sentinel'"),
        ("rediss+sentinel://127.0.0.1/registry?port=1", "has the parameter 'port'"),
    ],
)
def test_a_malformed_sentinel_url_is_refused_in_one_line(url: str, said: str) -> None:
    """A Sentinel URL that names no deployment is refused at the config with one line saying what is wrong."""
    with pytest.raises(ValueError, match=re.escape(said)) as caught:
        server_config(server_parser().parse_args(["--store", url]), {})
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("redis+sentinel://:secret@127.0.0.1:26379", "names no master"),
        ("redis+sentinel://:secret@/registry", "names no Sentinel"),
        ("redis+sentinel://:secret@127.0.0.1:99999/registry", "has the port '99999'"),
    ],
)
def test_a_malformed_sentinel_url_stops_the_server_with_one_line_and_status_2(url: str, said: str) -> None:
    """As a user runs it: exit 2 before listening, one line on standard error, the password hidden."""
    process = launch("--port", "0", "--store", url)
    out, err = process.communicate(timeout=GUARD)
    assert process.returncode == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert said in err
    assert "secret" not in err


def test_no_reachable_sentinel_stops_the_server_with_one_line_and_status_1() -> None:
    """Sentinels that do not answer, so no primary: exit 1 after the open timeout, one line naming the URL."""
    url = f"redis+sentinel://127.0.0.1:{free_port()},127.0.0.1:{free_port()}/registry"
    process = launch("--port", "0", "--store", url)
    out, err = process.communicate(timeout=GUARD * 2)
    assert process.returncode == 1, err
    assert "listening" not in out
    assert len(err.strip().splitlines()) == 1, err
    assert url in err
    assert "no Sentinel names a primary" in err


def test_min_replicas_needs_a_redis_store() -> None:
    """--store-min-replicas over the memory or file store is refused at start: only Redis has replicas."""
    with pytest.raises(ValueError, match="needs a Redis store"):
        server_config(server_parser().parse_args(["--store-min-replicas", "1"]), {})
    with pytest.raises(ValueError, match="non-negative"):
        ServerConfig(store="redis://127.0.0.1/0", store_min_replicas=-1)


def test_the_sentinel_url_for_the_log_hides_its_password(tmp_path: Path) -> None:
    """The store's description (its log line, its messages) never holds the password."""
    from aiobootstrap.store.url import describe

    shown = describe("redis+sentinel://user:secret@127.0.0.1:1,127.0.0.1:2/registry?db=2")
    assert shown == "redis+sentinel://user:***@127.0.0.1:1,127.0.0.1:2/registry?db=2"
