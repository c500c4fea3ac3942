"""Restart awareness: every reply names the server's boot, and clients refill a restarted server."""

from __future__ import annotations

import asyncio

import pytest

from aiobootstrap import BootstrapClient, BootstrapServer, ServerConfig, create_app
from aiobootstrap._names import BOOT_HEADER

from .helpers.clients import _restart
from .helpers.registry import peek, register_in, stored, stored_count
from .helpers.waits import GUARD, until


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/health", 200),
        ("GET", "/ranks", 200),
        ("GET", "/metrics", 200),
        ("GET", "/ns/a/health", 200),
        ("GET", "/get_transfer_engine_info?rank=0", 404),
        ("GET", "/get_transfer_engine_info?rank=-1", 400),
        ("GET", "/no/such/route", 404),
        ("POST", "/register_transfer_engine_info", 405),
        ("PUT", "/register_transfer_engine_info", 400),
    ],
)
async def test_every_reply_carries_the_boot_id(aiohttp_client, method, path, status):
    """Successes and errors alike name the boot, and it stays the same for the app's life."""
    client = await aiohttp_client(create_app())
    first = await client.request(method, path)
    second = await client.get("/health")
    assert first.status == status
    boot = first.headers[BOOT_HEADER]
    assert len(boot) >= 16
    assert second.headers[BOOT_HEADER] == boot


async def test_a_refused_request_carries_the_boot_id(aiohttp_client):
    """A 401 from the auth check names the boot too."""
    client = await aiohttp_client(create_app(ServerConfig(auth_token="t")))
    response = await client.get("/ranks")
    assert response.status == 401
    assert response.headers[BOOT_HEADER]


async def test_each_app_has_its_own_boot_id(aiohttp_client):
    """Two apps (two lives of a server) have different boot ids."""
    one = await aiohttp_client(create_app())
    two = await aiohttp_client(create_app())
    assert (await one.get("/health")).headers[BOOT_HEADER] != (await two.get("/health")).headers[BOOT_HEADER]


async def test_client_reregisters_after_a_restart():
    """A reregister=True client's next call refills a restarted server with its ranks' latest info."""
    server = await BootstrapServer(port=0).__aenter__()
    try:
        async with BootstrapClient(server.url, reregister=True) as client:
            await client.register(0, session_id="old", weights_info_dict={})
            await client.register(0, session_id="new", weights_info_dict={"w": [1, 2]})
            await client.register(1, session_id="one", weights_info_dict={})
            await client.register(2, session_id="gone", weights_info_dict={})
            assert await client.unregister(2)
            server = await _restart(server)
            assert await stored_count(server.registry) == 0
            listing = await client.list_ranks()
            assert [summary.rank for summary in listing.ranks] == [0, 1]
        async with BootstrapClient(server.url) as getter:
            info = await getter.get(0, timeout=GUARD)
            assert (info.session_id, info.weights_info_dict) == ("new", {"w": [1, 2]})
            assert await stored(server.registry, 2) is None
    finally:
        await server.close()


async def test_client_without_reregister_leaves_a_restarted_server_empty():
    """reregister is opt-in: by default a client replays nothing."""
    server = await BootstrapServer(port=0).__aenter__()
    try:
        async with BootstrapClient(server.url) as client:
            await client.register(0, session_id="s", weights_info_dict={})
            server = await _restart(server)
            assert (await client.list_ranks()).ranks == []
    finally:
        await server.close()


async def test_a_parked_getter_refills_the_restarted_server():
    """A client parked in get() while the server restarts re-registers its ranks before waiting again.

    Without it, two workers each waiting for the other would wait for ever.
    """
    server = await BootstrapServer(port=0).__aenter__()
    try:
        async with BootstrapClient(server.url, reregister=True) as worker:
            await worker.register(0, session_id="zero", weights_info_dict={})
            waiting = asyncio.create_task(worker.get(1, timeout=4 * GUARD))
            registry = server.registry
            await until(lambda: registry.parked == 1)
            server = await _restart(server)
            fresh = server.registry
            await until(lambda: peek(fresh, 0) is not None and fresh.parked == 1)
            async with BootstrapClient(server.url) as other:
                await other.register(1, session_id="one", weights_info_dict={})
                assert (await other.get(0, timeout=GUARD)).session_id == "zero"
            info = await asyncio.wait_for(waiting, GUARD)
            assert info.session_id == "one"
    finally:
        await server.close()


async def test_health_notices_a_restart():
    """health() alone is enough for a reregister=True client to refill a restarted server."""
    server = await BootstrapServer(port=0).__aenter__()
    try:
        async with BootstrapClient(server.url, reregister=True) as client:
            await client.register(5, session_id="five", weights_info_dict={})
            server = await _restart(server)
            assert await client.health()
            assert await stored(server.registry, 5) is not None
    finally:
        await server.close()


async def test_reregistration_goes_to_the_clients_namespace():
    """A namespaced client refills its own namespace after a restart, not the default one."""
    server = await BootstrapServer(port=0).__aenter__()
    try:
        async with BootstrapClient(server.url, reregister=True, namespace="team-a") as client:
            await client.register(3, session_id="three", weights_info_dict={})
            server = await _restart(server)
            assert await client.health()
        async with BootstrapClient(server.url, namespace="team-a") as getter:
            assert (await getter.get(3, timeout=GUARD)).session_id == "three"
        assert await stored(server.registry, 3) is None
    finally:
        await server.close()


async def test_a_long_poll_first_after_a_restart_refills_before_it_parks():
    """A reregister=True client whose first request to a restarted server is a long get
    re-registers before parking, not when the wait ends."""
    server = await BootstrapServer(port=0).__aenter__()
    try:
        async with BootstrapClient(server.url, reregister=True) as worker:
            await worker.register(0, session_id="zero", weights_info_dict={})
            server = await _restart(server)
            fresh = server.registry
            waiting = asyncio.create_task(worker.get(1, timeout=6 * GUARD))
            await until(lambda: peek(fresh, 0) is not None and fresh.parked == 1)
            assert not waiting.done()
            await register_in(fresh, 1, "one", {})
            assert (await asyncio.wait_for(waiting, GUARD)).session_id == "one"
    finally:
        await server.close()
