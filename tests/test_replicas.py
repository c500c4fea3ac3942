"""Two replicas over one Redis, seen over HTTP: one registry, and what a Redis outage looks like."""

from __future__ import annotations

import asyncio
from typing import Any

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._names import BOOT_HEADER
from aiobootstrap.server.app import REGISTRY
from testbed.redis_server import RedisServer

from .helpers.registry import registration
from .helpers.waits import GUARD, until


async def _replicas(aiohttp_client: Any, redis_server: RedisServer) -> tuple[Any, Any]:
    config = ServerConfig(store=redis_server.url)
    kwargs = {"server_kwargs": {"handler_cancellation": True}}
    return (
        await aiohttp_client(create_app(config), **kwargs),
        await aiohttp_client(create_app(config), **kwargs),
    )


async def test_a_waiter_on_one_replica_is_woken_by_a_registration_through_the_other(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """A get parked on A answers 200 with the info registered through B; both read it at once after."""
    a, b = await _replicas(aiohttp_client, redis_server)
    waiting = asyncio.create_task(
        a.get("/get_transfer_engine_info", params={"rank": "3", "wait": str(GUARD)})
    )
    await until(lambda: a.app[REGISTRY].parked == 1)
    assert (await b.put("/register_transfer_engine_info", json=registration(3, "through-b"))).status == 200
    reply = await asyncio.wait_for(waiting, GUARD)
    assert reply.status == 200
    assert (await reply.json())["remote_instance_transfer_engine_info"][0] == "through-b"
    for replica in (a, b):
        again = await replica.get("/get_transfer_engine_info", params={"rank": "3"})
        assert again.status == 200
    assert a.app[REGISTRY].store.incarnation == b.app[REGISTRY].store.incarnation


async def test_a_redis_outage_is_503_not_404_and_parked_waits_survive_it(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """Redis down: /ready 503 with Retry-After, /health 200, a get 503; a parked wait is answered after."""
    a, b = await _replicas(aiohttp_client, redis_server)
    waiting = asyncio.create_task(
        a.get("/get_transfer_engine_info", params={"rank": "5", "wait": str(GUARD)})
    )
    await until(lambda: a.app[REGISTRY].parked == 1)
    redis_server.kill()
    ready = await a.get("/ready")
    assert ready.status == 503
    assert "Retry-After" in ready.headers
    assert "detail" in await ready.json()
    assert (await a.get("/health")).status == 200
    lost = await b.get("/get_transfer_engine_info", params={"rank": "5"})
    assert lost.status == 503
    refused = await b.put("/register_transfer_engine_info", json=registration(5, "while down"))
    assert refused.status == 503
    assert not waiting.done()
    redis_server.start()
    async with asyncio.timeout(GUARD):
        # A write on a connection Redis dropped is a 503 (never sent twice);
        # the replica reconnects on its next call, as a client retrying would see.
        while (await b.put("/register_transfer_engine_info", json=registration(5, "back"))).status != 200:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    reply = await asyncio.wait_for(waiting, GUARD)
    assert reply.status == 200
    assert (await reply.json())["remote_instance_transfer_engine_info"][0] == "back"
    assert (await a.get("/ready")).status == 200


async def test_a_flushed_redis_changes_the_boot_id_on_every_replica(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """After FLUSHALL both replicas name one new boot id, so reregister=True clients refill the registry."""
    a, b = await _replicas(aiohttp_client, redis_server)
    await b.put("/register_transfer_engine_info", json=registration(0))
    before = (await a.get("/health")).headers[BOOT_HEADER]
    redis_server.flushall()
    await b.put("/register_transfer_engine_info", json=registration(1))
    await until(lambda: a.app[REGISTRY].store.incarnation != before)
    after_a = (await a.get("/health")).headers[BOOT_HEADER]
    after_b = (await b.get("/health")).headers[BOOT_HEADER]
    assert after_a == after_b != before


async def test_a_batch_parked_for_newer_versions_is_answered_by_the_first_registrations_after_a_flush(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """A batch get waiting for ranks 0-1 newer than version 2, then FLUSHALL: versions start again in the
    new incarnation, so the first registrations of both ranks after it answer the batch, not version 3."""
    a, b = await _replicas(aiohttp_client, redis_server)
    for rank in (0, 1):
        assert (await b.put("/register_transfer_engine_info", json=registration(rank, "old"))).status == 200
    boot = (await a.get("/health")).headers[BOOT_HEADER]
    waiting = asyncio.create_task(
        a.get(
            "/get_transfer_engine_info_batch",
            params={"ranks": "0-1", "after": "2", "boot": boot, "wait": str(GUARD)},
        )
    )
    await until(lambda: a.app[REGISTRY].parked >= 1)
    redis_server.flushall()
    for rank in (0, 1):
        registered = await b.put("/register_transfer_engine_info", json=registration(rank, "new"))
        assert registered.status == 200
        assert registered.headers[BOOT_HEADER] != boot
    reply = await asyncio.wait_for(waiting, GUARD)
    assert reply.status == 200
    assert reply.headers[BOOT_HEADER] != boot
    body = await reply.text()
    assert "new" in body
    assert "old" not in body
