"""The engines' faces over etcd, through two replicas of one registry (one member, a prefix per test):
Mooncake's metadata (an engine's RPC entry never taken over, whichever replica it reaches) and the
prefill bootstrap (its topology fixed once, readiness by distinct ranks, waits woken across replicas),
as over Redis. The encoder list's eviction across replicas is in ``test_encoder_health.py``, the
three-member cluster's faults in ``test_etcd_cluster.py``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.app import REGISTRY
from testbed.etcd_server import Cluster, unique_prefix

from .helpers.prefill import ALL, rank_body, route
from .helpers.waits import GUARD, parked_get, until

RPC = "/metadata?key=mooncake%2Frpc_meta%2F10.0.0.7%3A15868"
RAM = "/metadata?key=mooncake%2Fram%2F10.0.0.7%3A15868"


async def _replicas(aiohttp_client: Any, cluster: Cluster) -> tuple[Any, Any]:
    config = ServerConfig(store=cluster.url(unique_prefix()))
    kwargs = {"server_kwargs": {"handler_cancellation": True}}
    return (
        await aiohttp_client(create_app(config), **kwargs),
        await aiohttp_client(create_app(config), **kwargs),
    )


async def test_mooncake_metadata_through_two_replicas(aiohttp_client: Any, shared_etcd: Cluster) -> None:
    a, b = await _replicas(aiohttp_client, shared_etcd)
    # Two engines claim one RPC entry at once, one through each replica: one wins, the other is refused.
    claims = await asyncio.gather(
        a.put(RPC, data=b'{"rpc_port":15868}'), b.put(RPC, data=b'{"rpc_port":15869}')
    )
    texts = sorted([(claim.status, await claim.text()) for claim in claims])
    assert texts == [(200, "metadata updated"), (400, "Duplicate rpc_meta key not allowed")]
    held = await (await a.get(RPC)).read()
    again = await b.put(RPC, data=held)
    assert (again.status, await again.text()) == (200, "metadata unchanged")

    waiting = await parked_get(b, f"{RAM}&wait={GUARD}")
    put = await a.put(RAM, data=b'{"buffers":[1]}')
    assert put.status == 200
    woken = await asyncio.wait_for(waiting, GUARD)
    assert (woken.status, await woken.read()) == (200, b'{"buffers":[1]}')
    assert woken.headers["X-Aiobootstrap-Version"] == put.headers["X-Aiobootstrap-Version"]

    assert (await b.delete(RAM)).status == 200
    gone = await a.get(RAM)
    assert (gone.status, await gone.text()) == (404, "metadata not found")


async def test_a_prefill_deployment_through_two_replicas(aiohttp_client: Any, shared_etcd: Cluster) -> None:
    a, b = await _replicas(aiohttp_client, shared_etcd)
    topology = await parked_get(b, f"/route?{ALL}&wait={GUARD}")
    for dp in (0, 1):
        for tp, replica in ((0, a), (1, b)):
            assert await (await replica.put("/route", json=rank_body(tp, dp))).text() == "OK"
            if (dp, tp) == (0, 0):
                again = await b.put("/route", json=rank_body(0, 0))  # the same rank twice counts once
                assert again.status == 200
                early = await a.get(f"/route?{ALL}")
                assert (early.status, await early.text()) == (
                    503,
                    "Prefill server not fully registered yet (1 workers registered).",
                )
    complete = await asyncio.wait_for(topology, GUARD)
    assert json.loads(await complete.read())["dp_size"] == 2
    contradiction = await a.put("/route", json=rank_body(0, 0, tp_size=4))
    assert contradiction.status == 409
    address = await b.get(f"/route?{route(1, 0, 1, 0)}")
    assert json.loads(await address.read()) == {"rank_ip": "10.0.0.11", "rank_port": 17011}

    registry = a.app[REGISTRY]
    rooms = asyncio.create_task(a.post(f"/query_dp_ranks?wait={GUARD}", json={"bootstrap_rooms": [12345]}))
    await until(lambda: registry.parked == 1)
    assert (await b.post("/register_dp_rank", json={"bootstrap_room": 12345, "dp_rank": 1})).status == 200
    answered = await asyncio.wait_for(rooms, GUARD)
    assert await answered.json() == {"12345": 1}
