"""A version from an earlier incarnation of the registry never leaves a consumer waiting (SPEC 10, last bullet)."""

from __future__ import annotations

import asyncio

from aiobootstrap import BootstrapClient, BootstrapServer, ServerConfig, create_app
from aiobootstrap._names import BOOT_HEADER
from aiobootstrap.server.app import REGISTRY

from .helpers.registry import registration
from .helpers.waits import GUARD, until


async def test_after_with_another_boot_counts_as_zero(aiohttp_client):
    """&boot= naming another incarnation: the get, the batch and the encoder list answer what is there."""
    client = await aiohttp_client(create_app(ServerConfig()))
    await client.put("/register_transfer_engine_info", json=registration(0))
    await client.post("/register_encoder_url", json={"url": "http://e"})
    boot = (await client.get("/health")).headers[BOOT_HEADER]
    get = await client.get("/get_transfer_engine_info?rank=0&after=13&wait=30&boot=earlier")
    assert get.status == 200
    assert (await get.json())["version"] == 1
    batch = await client.get("/get_transfer_engine_info_batch?ranks=0&after=13&wait=30&boot=earlier")
    assert batch.status == 200
    urls = await client.get("/list_encoder_urls?after=13&wait=30&boot=earlier")
    assert (await urls.json())["encoder_urls"] == ["http://e"]
    same = await client.get(f"/get_transfer_engine_info?rank=0&after=13&boot={boot}")
    assert same.status == 404  # this incarnation's after holds


async def test_a_parked_get_is_answered_by_the_restarted_servers_registration():
    """The issue's case: get(0, after=V) parked; the in-memory server restarts; rank 0 registers again
    as version 1; the get returns it, well within its timeout."""
    server = await BootstrapServer(port=0).__aenter__()
    try:
        async with BootstrapClient(server.url) as worker, BootstrapClient(server.url) as consumer:
            for _ in range(13):
                await worker.register(0, session_id="old", weights_info_dict={})
            held = await consumer.get(0, timeout=GUARD)
            assert held.version == 13
            waiting = asyncio.create_task(consumer.get(0, after=held.version, timeout=8))
            await until(lambda: server.app[REGISTRY].parked == 1)
            port = server.port
            await server.close()
            server = BootstrapServer(port=port)
            await server.start()
            await worker.register(0, session_id="new", weights_info_dict={})
            info = await asyncio.wait_for(waiting, GUARD)
            assert (info.session_id, info.version) == ("new", 1)
    finally:
        await server.close()
