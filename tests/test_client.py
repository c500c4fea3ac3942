"""The async client against a real server (aiohttp_server) and BootstrapServer."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from aiobootstrap import (
    BadRequest,
    BootstrapClient,
    BootstrapError,
    BootstrapServer,
    RankNotRegistered,
    ServerConfig,
    ServerUnavailable,
    TransferEngineInfo,
    create_app,
)
from aiobootstrap._app import REGISTRY

from .conftest import GUARD, register_in, stored, until

ServerFactory = Callable[..., Awaitable[TestServer]]


class Seen:
    """Every request a test server received: (method, path, query, authorization)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], str | None]] = []

    @web.middleware
    async def middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append(
            (request.method, request.path, dict(request.query), request.headers.get("Authorization"))
        )
        response: web.StreamResponse = await handler(request)
        return response


async def start(aiohttp_server: ServerFactory, config: ServerConfig | None = None) -> tuple[TestServer, Seen]:
    app = create_app(config or ServerConfig())
    seen = Seen()
    app.middlewares.append(seen.middleware)
    server = await aiohttp_server(app)
    return server, seen


def url_of(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_register_get_and_get_many_round_trip(aiohttp_server: ServerFactory) -> None:
    """What one client registers, another gets back as TransferEngineInfo, singly and in bulk."""
    server, _ = await start(aiohttp_server)
    async with BootstrapClient(url_of(server)) as client:
        for rank in range(4):
            await client.register(rank, session_id=f"10.0.0.{rank}:18000", weights_info_dict={"w": rank})
        info = await client.get(3, timeout=0)
        assert info == TransferEngineInfo(3, "10.0.0.3:18000", {"w": 3}, version=4)
        infos = await client.get_many(range(4), timeout=0)
        assert sorted(infos) == [0, 1, 2, 3]
        assert infos[2].session_id == "10.0.0.2:18000"
        assert await client.get_many([], timeout=0) == {}


async def test_get_waits_for_a_later_registration(aiohttp_server: ServerFactory) -> None:
    """get(timeout=...) long-polls and returns once the rank registers."""
    server, _ = await start(aiohttp_server)
    registry = server.app[REGISTRY]
    async with BootstrapClient(url_of(server)) as getter, BootstrapClient(url_of(server)) as worker:
        waiter = asyncio.create_task(getter.get(5, timeout=GUARD))
        await until(lambda: registry.parked == 1)
        await worker.register(5, session_id="late", weights_info_dict={})
        info = await asyncio.wait_for(waiter, GUARD)
        assert info.session_id == "late"


async def test_get_timeout_raises_rank_not_registered(aiohttp_server: ServerFactory) -> None:
    """When the timeout expires, get raises RankNotRegistered, also a TimeoutError, naming the rank."""
    server, _ = await start(aiohttp_server)
    async with BootstrapClient(url_of(server)) as client:
        with pytest.raises(RankNotRegistered) as caught:
            await client.get(7, timeout=0.05)
    assert isinstance(caught.value, TimeoutError)
    assert isinstance(caught.value, BootstrapError)
    assert caught.value.rank == 7
    assert "rank 7" in str(caught.value)


async def test_get_many_timeout_names_the_missing_ranks(aiohttp_server: ServerFactory) -> None:
    """get_many raises RankNotRegistered listing exactly the ranks still missing."""
    server, _ = await start(aiohttp_server)
    async with BootstrapClient(url_of(server)) as client:
        await client.register(1, session_id="s", weights_info_dict={})
        with pytest.raises(RankNotRegistered) as caught:
            await client.get_many([0, 1, 2], timeout=0.05)
    assert list(caught.value.ranks) == [0, 2]
    assert "0" in str(caught.value)
    assert "2" in str(caught.value)


async def test_get_many_splits_a_scattered_rank_set(aiohttp_server: ServerFactory) -> None:
    """A rank set too scattered for one query string is asked in several batches, merged."""
    server, seen = await start(aiohttp_server)
    ranks = list(range(0, 6000, 2))  # 3,000 separate ranks: ~17 KB as a list
    registry = server.app[REGISTRY]
    for rank in ranks:
        await register_in(registry, rank, f"s{rank}", {})
    async with BootstrapClient(url_of(server)) as client:
        infos = await client.get_many(ranks, timeout=0)
    assert sorted(infos) == ranks
    batches = [query for method, path, query, _ in seen.requests if path.endswith("_batch")]
    assert len(batches) > 1
    assert all(len(query["ranks"]) <= 4000 for query in batches)


async def test_wait_beyond_the_server_cap_is_asked_again(aiohttp_server: ServerFactory) -> None:
    """A caller's timeout longer than the server's --max-wait is covered by asking again."""
    server, seen = await start(aiohttp_server, ServerConfig(max_wait=0.02))
    async with BootstrapClient(url_of(server)) as client:
        waiter = asyncio.create_task(client.get(3, timeout=GUARD))
        await until(lambda: len(seen.requests) >= 3)
        assert not waiter.done()
        await register_in(server.app[REGISTRY], 3, "s", {})
        assert (await asyncio.wait_for(waiter, GUARD)).session_id == "s"


async def test_bad_request_is_raised_at_once_not_retried(aiohttp_server: ServerFactory) -> None:
    """A 400 raises BadRequest with the server's detail after exactly one request."""
    server, seen = await start(aiohttp_server, ServerConfig(world_size=4))
    async with BootstrapClient(url_of(server)) as client:
        with pytest.raises(BadRequest) as caught:
            await client.get(7, timeout=GUARD)
        assert "world size 4" in caught.value.detail
        with pytest.raises(BadRequest):
            await client.register(9, session_id="s", weights_info_dict={})
    assert len(seen.requests) == 2


async def test_token_is_sent_as_a_bearer_header(aiohttp_server: ServerFactory) -> None:
    """token= goes with every request as Authorization: Bearer."""
    server, seen = await start(aiohttp_server)
    async with BootstrapClient(url_of(server), token="s3cret") as client:
        await client.register(0, session_id="s", weights_info_dict={})
        await client.get(0, timeout=0)
    assert {auth for *_, auth in seen.requests} == {"Bearer s3cret"}


async def test_get_survives_a_server_that_starts_late() -> None:
    """A getter started before the server retries the refused connection until it is up."""
    port = free_port()
    async with BootstrapClient(f"http://127.0.0.1:{port}") as client:
        waiter = asyncio.create_task(client.get(0, timeout=GUARD))
        await asyncio.sleep(
            0.2
        )  # the getter must meet a refused connection first: that is the case under test
        assert not waiter.done()
        async with BootstrapServer(port=port) as server:
            await register_in(server.registry, 0, "up", {})
            info = await asyncio.wait_for(waiter, GUARD)
    assert info.session_id == "up"


async def test_register_survives_a_server_that_starts_late() -> None:
    """register retries while the server is not up yet."""
    port = free_port()
    async with BootstrapClient(f"http://127.0.0.1:{port}") as client:
        registering = asyncio.create_task(
            client.register(1, session_id="s", weights_info_dict={}, timeout=GUARD)
        )
        await asyncio.sleep(0.2)  # let it meet a refused connection first
        async with BootstrapServer(port=port) as server:
            await asyncio.wait_for(registering, GUARD)
            assert await stored(server.registry, 1) is not None


async def test_unreachable_server_runs_out_as_rank_not_registered() -> None:
    """With no server at all, get ends at its timeout with RankNotRegistered saying why."""
    async with BootstrapClient(f"http://127.0.0.1:{free_port()}") as client:
        with pytest.raises(RankNotRegistered) as caught:
            await client.get(2, timeout=0.2)
        assert "could not be reached" in str(caught.value)
        with pytest.raises(ServerUnavailable):
            await client.register(2, session_id="s", weights_info_dict={}, timeout=0.2)
        assert not await client.health()


async def test_list_ranks_and_health(aiohttp_server: ServerFactory) -> None:
    """list_ranks returns who registered (no weights); health is True for a live server."""
    server, _ = await start(aiohttp_server, ServerConfig(world_size=3))
    async with BootstrapClient(url_of(server)) as client:
        assert await client.health()
        await client.register(1, session_id="s1", weights_info_dict={"w": 1})
        listing = await client.list_ranks()
    assert [(item.rank, item.session_id) for item in listing.ranks] == [(1, "s1")]
    assert listing.missing == [0, 2]
    assert listing.world_size == 3


async def test_client_reuses_one_session_and_closes_it(aiohttp_server: ServerFactory) -> None:
    """All calls share one ClientSession, closed with the client."""
    server, _ = await start(aiohttp_server)
    client = BootstrapClient(url_of(server))
    async with client:
        await client.health()
        session = client._session
        await client.list_ranks()
        assert client._session is session
    assert session is not None
    assert session.closed


async def test_server_busy_503_is_retried_until_the_rank_arrives(aiohttp_server: ServerFactory) -> None:
    """A 503 (here: over --max-waiters) is retried with backoff, not raised, while time remains."""
    server, seen = await start(aiohttp_server, ServerConfig(max_waiters=0))
    async with BootstrapClient(url_of(server)) as client:
        waiter = asyncio.create_task(client.get(1, timeout=GUARD))
        await until(lambda: len(seen.requests) >= 2)
        await register_in(server.app[REGISTRY], 1, "s", {})
        assert (await asyncio.wait_for(waiter, GUARD)).session_id == "s"
        with pytest.raises(RankNotRegistered, match="limit"):
            await client.get(2, timeout=0.1)
