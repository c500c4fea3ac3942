"""A failover to a replica that holds no data: the boot id changes, waits are answered, and no 404 lies.

The replica is emptied while it stays a replica (``replica-read-only no``,
then ``FLUSHALL`` on it: the primary's later writes would still reach it,
but there are none), then the primary is SIGKILLed and Sentinel promotes
the empty node, the only candidate. Each test has a deployment of its own,
since it leaves one that lost its data.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._names import BOOT_HEADER
from aiobootstrap.server.app import REGISTRY
from testbed.redis_server import REDIS_SERVER, SKIP_REASON
from testbed.sentinel_cluster import SentinelCluster

from .helpers.registry import registration
from .helpers.waits import GUARD

FAILOVER_GUARD = 30.0
"""Seconds a failover may take before a test fails: generous, never a measurement."""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SentinelCluster]:
    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    deployment = SentinelCluster(tmp_path / "sentinel")
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()


async def _park(replica: Any, rank: int, **query: str) -> asyncio.Task[Any]:
    registry = replica.app[REGISTRY]
    parked = registry.parked
    params = {"rank": str(rank), "wait": str(FAILOVER_GUARD * 2), **query}
    waiting = asyncio.create_task(replica.get("/get_transfer_engine_info", params=params))
    async with asyncio.timeout(GUARD):
        while registry.parked != parked + 1:  # noqa: ASYNC110
            await asyncio.sleep(0)
    return waiting


async def test_a_failover_to_an_empty_replica_changes_the_boot_id_and_answers_the_parked_waits(
    aiohttp_client: Any, cluster: SentinelCluster
) -> None:
    """Rank 0 registered, then the empty replica promoted: both replicas name one new boot id; a rank 0 read
    is 503 while there is no primary and a 404 only under the new boot id (the store proved it absent in
    the new incarnation, never "unregistered" in the old one); waits parked before the kill (for a new rank,
    and for a newer rank 0 than the one seen) are answered by the registrations after the move."""
    config = ServerConfig(store=cluster.url, store_prefix="emptied")
    kwargs = {"server_kwargs": {"handler_cancellation": True}}
    a = await aiohttp_client(create_app(config), **kwargs)
    b = await aiohttp_client(create_app(config), **kwargs)
    registered = await a.put("/register_transfer_engine_info", json=registration(0, "before"))
    assert registered.status == 200
    boot = registered.headers[BOOT_HEADER]
    seen = await b.get("/get_transfer_engine_info", params={"rank": "0"})
    version = (await seen.json())["version"]
    new_rank = await _park(a, 1)
    newer = await _park(b, 0, after=str(version), boot=boot)

    replica = cluster.replica()
    replica.command("CONFIG", "SET", "replica-read-only", "no")
    replica.command("FLUSHALL")
    old = cluster.kill_primary()

    async def read_rank_0(through: Any) -> tuple[int, str]:
        reply = await through.get("/get_transfer_engine_info", params={"rank": "0"})
        return reply.status, reply.headers[BOOT_HEADER]

    answers: list[tuple[int, str]] = []
    async with asyncio.timeout(FAILOVER_GUARD):
        while not (
            await asyncio.to_thread(cluster.promoted, old)
            and a.app[REGISTRY].store.incarnation != boot
            and b.app[REGISTRY].store.incarnation != boot
        ):
            answers += [await read_rank_0(a), await read_rank_0(b)]
            await asyncio.sleep(0.02)
        answers += [await read_rank_0(a), await read_rank_0(b)]
    assert {status for status, _ in answers} <= {200, 404, 503}
    assert 503 in {status for status, _ in answers}  # the outage was seen
    # A 404 is the new incarnation's: the old boot id never says rank 0 is gone.
    assert [(status, named) for status, named in answers if status == 404 and named == boot] == []
    assert [(status, named) for status, named in answers if status == 200 and named != boot] == []
    fresh = a.app[REGISTRY].store.incarnation
    assert b.app[REGISTRY].store.incarnation == fresh != boot
    assert (await a.get("/ready")).status == 200

    assert not new_rank.done()
    assert not newer.done()
    # Rank 0 first: its new version is no newer than the one the waiter saw, in the old incarnation.
    for rank, info in ((0, "zero after"), (1, "one after")):
        reply = await b.put("/register_transfer_engine_info", json=registration(rank, info))
        assert reply.status == 200
    zero_after = await b.get("/get_transfer_engine_info", params={"rank": "0"})
    assert (await zero_after.json())["version"] <= version
    for waiting, info in ((new_rank, "one after"), (newer, "zero after")):
        answer = await asyncio.wait_for(waiting, GUARD)
        assert answer.status == 200
        assert answer.headers[BOOT_HEADER] == fresh
        assert (await answer.json())["remote_instance_transfer_engine_info"][0] == info
