"""The engines' faces over a Sentinel deployment through two aiobootstrap replicas, across a failover
(``SENTINEL FAILOVER`` once the replica holds what was written: what a failover may lose is
``test_sentinel``'s): Mooncake's metadata (an engine's RPC entry never
taken over, through either replica) and the prefill bootstrap (its topology and ranks), every
acknowledged write read back through both, and waits parked before the failover answered after it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiobootstrap import ServerConfig, create_app
from testbed.sentinel_cluster import SentinelCluster

from .helpers.prefill import ALL, rank_body, route
from .helpers.waits import GUARD, parked_get
from .sentinel_cluster import cluster as cluster  # the module's deployment

FAILOVER_GUARD = 30.0
RPC = "/metadata?key=mooncake%2Frpc_meta%2F10.0.0.7%3A15868"
RAM = "/metadata?key=mooncake%2Fram%2F10.0.0.7%3A15868"


async def _acknowledged(send: Any) -> Any:
    """Send until it is not a 503 (no primary for a moment), as the engines' clients retry; the reply."""
    async with asyncio.timeout(FAILOVER_GUARD):
        while (reply := await send()).status == 503:
            assert "Retry-After" in reply.headers
            await asyncio.sleep(0.05)
    return reply


async def test_mooncake_and_prefill_hold_through_a_failover(
    aiohttp_client: Any, cluster: SentinelCluster
) -> None:
    await asyncio.to_thread(cluster.wait_healthy, FAILOVER_GUARD)  # a test before may have just healed it
    config = ServerConfig(store=cluster.url, store_prefix="faces")
    kwargs = {"server_kwargs": {"handler_cancellation": True}}
    a = await aiohttp_client(create_app(config), **kwargs)
    b = await aiohttp_client(create_app(config), **kwargs)

    assert (await a.put(RPC, data=b'{"rpc_port":15868}')).status == 200
    assert (await b.put(RAM, data=b'{"buffers":[1]}')).status == 200
    for tp in (0, 1):
        assert await (await a.put("/route", json=rank_body(tp, 0))).text() == "OK"
    late_value = await parked_get(b, f"{RAM}&after=2&wait={FAILOVER_GUARD * 2}")
    topology = await parked_get(a, f"/route?{ALL}&wait={FAILOVER_GUARD * 2}")

    await asyncio.to_thread(cluster.wait_synced, FAILOVER_GUARD)  # the replica holds it all: nothing to lose
    old = await asyncio.to_thread(cluster.failover, FAILOVER_GUARD)
    async with asyncio.timeout(FAILOVER_GUARD):
        while not await asyncio.to_thread(cluster.promoted, old):  # noqa: ASYNC110
            await asyncio.sleep(0.05)

    # The engine's RPC entry is still its own, through the replica that did not write it.
    taken = await _acknowledged(lambda: b.put(RPC, data=b'{"rpc_port":1}'))
    assert (taken.status, await taken.text()) == (400, "Duplicate rpc_meta key not allowed")
    again = await _acknowledged(lambda: b.put(RPC, data=b'{"rpc_port":15868}'))
    assert (again.status, await again.text()) == (200, "metadata unchanged")
    for tp in (0, 1):
        assert (await _acknowledged(lambda tp=tp: b.put("/route", json=rank_body(tp, 1)))).status == 200
    assert (await _acknowledged(lambda: a.put(RAM, data=b'{"buffers":[1,2]}'))).status == 200

    woken = await asyncio.wait_for(late_value, GUARD)
    assert (woken.status, await woken.read()) == (200, b'{"buffers":[1,2]}')
    complete = await asyncio.wait_for(topology, GUARD)
    assert complete.status == 200
    assert json.loads(await complete.read())["dp_size"] == 2
    for replica in (a, b):
        assert await (await replica.get(RAM)).read() == b'{"buffers":[1,2]}'
        assert await (await replica.get(RPC)).read() == b'{"rpc_port":15868}'
        address = await replica.get(f"/route?{route(1, 0, 1, 0)}")
        assert json.loads(await address.read())["rank_port"] == 17011
