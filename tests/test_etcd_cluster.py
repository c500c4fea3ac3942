"""Two replicas over a three-member etcd cluster whose members die: nothing acknowledged is lost, no 500,
and /ready says 503 while a majority is down.

Each test starts its own cluster (``etcd_cluster``: real members on loopback ports, etcd's default
election settings) and two aiobootstrap servers over it, and SIGKILLs members while they serve.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._names import BOOT_HEADER
from aiobootstrap.server.app import REGISTRY
from testbed.etcd_server import Cluster, Member, unique_prefix

from .helpers.registry import registration
from .helpers.waits import GUARD, until

REGISTER = "/register_transfer_engine_info"
GET = "/get_transfer_engine_info"

STORM = 150
"""Registrations in the storm, each of its own rank."""


async def _servers(aiohttp_client: Any, cluster: Cluster) -> tuple[Any, Any]:
    config = ServerConfig(store=cluster.url(unique_prefix()))
    kwargs = {"server_kwargs": {"handler_cancellation": True}}
    return (
        await aiohttp_client(create_app(config), **kwargs),
        await aiohttp_client(create_app(config), **kwargs),
    )


async def _boot(replica: Any) -> str:
    async with asyncio.timeout(GUARD):
        while (reply := await replica.get("/ready")).status != 200:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    boot: str = reply.headers[BOOT_HEADER]
    return boot


async def test_the_leader_killed_mid_storm_loses_no_acknowledged_registration(
    aiohttp_client: Any, etcd_cluster: Cluster
) -> None:
    """Registrations through two replicas, the leader SIGKILLed once a third are acknowledged: each one
    retried on 503 until acknowledged, every acknowledged one reads back through both replicas, no
    reply is a 500, a wait parked before the kill is answered after it, and the boot id is kept. Then a
    majority down (a second member killed): /ready 503 until both are back, and nothing lost.

    One test for both, on one cluster: three members started cost more of the suite than either part."""
    a, b = await _servers(aiohttp_client, etcd_cluster)
    before = await _boot(a)
    parked = asyncio.create_task(a.get(GET, params={"rank": "9999", "wait": str(4 * GUARD)}))
    await until(lambda: a.app[REGISTRY].parked == 1)
    statuses: collections.Counter[int] = collections.Counter()
    acknowledged: dict[int, str] = {}
    third = asyncio.Event()
    ranks: asyncio.Queue[int] = asyncio.Queue()
    for rank in range(STORM):
        ranks.put_nowait(rank)

    async def register() -> None:
        while not ranks.empty():
            rank = ranks.get_nowait()
            replica = (a, b)[rank % 2]
            session = f"10.0.0.{rank % 250}:{rank}"
            while True:
                reply = await replica.put(REGISTER, json=registration(rank, session))
                statuses[reply.status] += 1
                if reply.status == 200:
                    acknowledged[rank] = session
                    break
                await asyncio.sleep(0.05)  # the client's retry after a 503, not a wait for an effect
            if len(acknowledged) >= STORM // 3:
                third.set()

    async with asyncio.timeout(4 * GUARD):
        workers = [asyncio.create_task(register()) for _ in range(8)]
        await third.wait()
        leader = await asyncio.to_thread(etcd_cluster.leader)
        leader.kill()
        await asyncio.gather(*workers)
    assert set(statuses) <= {200, 503}, statuses
    assert len(acknowledged) == STORM
    for replica in (a, b):
        for rank, session in acknowledged.items():
            async with asyncio.timeout(GUARD):
                while (reply := await replica.get(GET, params={"rank": str(rank)})).status == 503:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            assert reply.status == 200, (rank, reply.status)
            assert (await reply.json())["remote_instance_transfer_engine_info"][0] == session
    assert not parked.done()
    async with asyncio.timeout(GUARD):
        while (await b.put(REGISTER, json=registration(9999, "after the kill"))).status != 200:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    answered = await asyncio.wait_for(parked, GUARD)
    assert answered.status == 200
    assert (await answered.json())["remote_instance_transfer_engine_info"][0] == "after the kill"
    assert await _boot(a) == await _boot(b) == before
    print(f"storm statuses: {dict(statuses)}")
    await _majority_down_then_back(a, b, etcd_cluster, leader, before)


async def _majority_down_then_back(a: Any, b: Any, cluster: Cluster, dead: Member, before: str) -> None:
    """One more member killed beside the dead leader: /ready 503 with Retry-After, a get 503 (never a
    404), a register 503, /health 200; both started again: /ready 200, the records there, the boot id kept."""
    second = next(member for member in cluster.members if member is not dead)
    second.kill()
    async with asyncio.timeout(GUARD):
        while (ready := await a.get("/ready")).status != 503:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    assert "Retry-After" in ready.headers
    assert "detail" in await ready.json()
    assert (await a.get("/health")).status == 200
    assert (await b.get(GET, params={"rank": "0"})).status == 503
    assert (await b.put(REGISTER, json=registration(STORM))).status == 503
    dead.start()
    second.start()
    for replica in (a, b):
        assert await _boot(replica) == before
        async with asyncio.timeout(GUARD):
            while (reply := await replica.get(GET, params={"rank": "0"})).status == 503:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert reply.status == 200
