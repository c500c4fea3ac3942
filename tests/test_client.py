"""The async client against a real server (aiohttp_server) and BootstrapServer."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from aiobootstrap import (
    Backoff,
    BadRequest,
    BootstrapClient,
    BootstrapError,
    RankNotRegistered,
    ServerConfig,
    ServerUnavailable,
    SyncBootstrapClient,
    TransferEngineInfo,
    UnexpectedReply,
)
from aiobootstrap.server.app import REGISTRY

from .helpers.clients import ServerFactory, start, url_of
from .helpers.registry import register_in, stored
from .helpers.waits import GUARD, until


class ScriptedResolver(AbstractResolver):
    """Name lookups that fail ``failures`` times (a server not reachable yet), then
    give the loopback address: a connection failure scripted, not slept for."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.lookups = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups += 1
        if self.lookups <= self.failures:
            raise OSError(f"lookup {self.lookups} of {host} fails, as scripted")
        return [
            ResolveResult(
                hostname=host,
                host="127.0.0.1",
                port=port,
                family=socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        pass


FAST = Backoff(0.001, 0.01)
"""Retries a test does not wait for: the scripted failures are the point, not the delays."""


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


async def test_get_survives_a_server_that_is_not_reachable_yet(aiohttp_server: ServerFactory) -> None:
    """A getter retries failed connections (scripted: the first lookups fail) until the server answers."""
    server, _ = await start(aiohttp_server)
    await register_in(server.app[REGISTRY], 0, "up", {})
    resolver = ScriptedResolver(failures=3)
    async with (
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False)
        ) as session,
        BootstrapClient(f"http://registry:{server.port}", session=session, backoff=FAST) as client,
    ):
        info = await asyncio.wait_for(client.get(0, timeout=GUARD), GUARD)
    assert info.session_id == "up"
    assert resolver.lookups > 3


async def test_register_survives_a_server_that_is_not_reachable_yet(aiohttp_server: ServerFactory) -> None:
    """register retries failed connections until the server answers, then registers once."""
    server, seen = await start(aiohttp_server)
    resolver = ScriptedResolver(failures=3)
    async with (
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False)
        ) as session,
        BootstrapClient(f"http://registry:{server.port}", session=session, backoff=FAST) as client,
    ):
        await asyncio.wait_for(client.register(1, session_id="s", weights_info_dict={}, timeout=GUARD), GUARD)
    assert await stored(server.app[REGISTRY], 1) is not None
    assert [method for method, *_ in seen.requests] == ["PUT"]


async def test_an_unreachable_server_raises_server_unavailable_not_rank_not_registered() -> None:
    """With no server at all, every call ends at its timeout with ServerUnavailable saying why."""
    async with BootstrapClient(f"http://127.0.0.1:{free_port()}", backoff=FAST) as client:
        with pytest.raises(ServerUnavailable, match="could not be reached") as caught:
            await client.get(2, timeout=0.05)
        assert not isinstance(caught.value, RankNotRegistered)
        with pytest.raises(ServerUnavailable, match="could not be reached"):
            await client.get_many([1, 2], timeout=0.05)
        with pytest.raises(ServerUnavailable):
            await client.register(2, session_id="s", weights_info_dict={}, timeout=0.05)
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


async def test_client_reuses_one_connection_and_closes_it(aiohttp_server: ServerFactory) -> None:
    """Calls in turn share one keep-alive connection; closing the client closes it."""
    server, seen = await start(aiohttp_server)
    async with BootstrapClient(url_of(server)) as client:
        await client.health()
        await client.register(0, session_id="s", weights_info_dict={})
        await client.get_many([0], timeout=0)
    assert len({peer for *_, peer in seen.peers}) == 1
    await until(lambda: not server.runner.server.connections)  # type: ignore[union-attr]


async def test_an_injected_session_is_used_and_left_open(aiohttp_server: ServerFactory) -> None:
    """session= carries every request (its default headers arrive) and stays open after the client closes."""
    server, seen = await start(aiohttp_server)
    async with aiohttp.ClientSession(headers={"X-Caller": "mine"}) as session:
        async with BootstrapClient(url_of(server), session=session) as client:
            await client.register(0, session_id="s", weights_info_dict={})
            await client.get(0, timeout=0)
        assert not session.closed
        assert {caller for caller, _ in seen.peers} == {"mine"}
        async with session.get(url_of(server) + "/health") as response:
            assert response.status == 200


async def test_an_injected_connector_is_used_and_left_open(aiohttp_server: ServerFactory) -> None:
    """connector= serves the client's session; closing the client leaves the caller's connector open."""
    server, _ = await start(aiohttp_server)
    connector = aiohttp.TCPConnector()
    try:
        async with BootstrapClient(url_of(server), connector=connector) as client:
            assert await client.health()
        assert not connector.closed
    finally:
        await connector.close()


async def test_200_parked_gets_leave_room_for_one_more(aiohttp_server: ServerFactory) -> None:
    """One client holds 200 parked gets and a 201st still reaches the server and is answered."""
    server, _ = await start(aiohttp_server)
    registry = server.app[REGISTRY]
    async with BootstrapClient(url_of(server)) as client:
        parked = [asyncio.create_task(client.get(1000 + rank, timeout=GUARD * 6)) for rank in range(200)]
        try:
            await until(lambda: registry.parked == 200)
            one_more = asyncio.create_task(client.get(5, timeout=GUARD))
            await until(lambda: registry.parked == 201)
            await register_in(registry, 5, "s5", {})
            assert (await asyncio.wait_for(one_more, GUARD)).session_id == "s5"
        finally:
            for task in parked:
                task.cancel()
            await asyncio.wait(parked)


async def test_server_busy_503_is_retried_until_the_rank_arrives(aiohttp_server: ServerFactory) -> None:
    """A 503 (here: over --max-waiters) is retried with backoff, not raised, while time remains."""
    server, seen = await start(aiohttp_server, ServerConfig(max_waiters=0))
    async with BootstrapClient(url_of(server)) as client:
        waiter = asyncio.create_task(client.get(1, timeout=GUARD))
        await until(lambda: len(seen.requests) >= 2)
        await register_in(server.app[REGISTRY], 1, "s", {})
        assert (await asyncio.wait_for(waiter, GUARD)).session_id == "s"
        with pytest.raises(ServerUnavailable, match="limit") as caught:
            await client.get(2, timeout=0.1)
        assert not isinstance(caught.value, RankNotRegistered)


def classic_server(answer_after: int | None = None) -> tuple[web.Application, list[float]]:
    """A polling server as engines run today: a 404 at once, whatever the wait asked;
    after ``answer_after`` requests, rank 1's info. Records when each request came."""
    asked: list[float] = []

    async def get_info(request: web.Request) -> web.Response:
        asked.append(asyncio.get_running_loop().time())
        rank = request.query["rank"]
        if answer_after is not None and len(asked) > answer_after:
            return web.json_response({"rank": 1, "remote_instance_transfer_engine_info": ["s1", {}]})
        return web.json_response({"detail": f"No transfer engine info for rank {rank}"}, status=404)

    app = web.Application()
    app.router.add_get("/get_transfer_engine_info", get_info)
    return app, asked


async def test_a_server_that_does_not_wait_is_asked_a_few_times_a_second(
    aiohttp_server: ServerFactory,
) -> None:
    """Against a server answering 404 at once, get backs off (no hot loop) and ends at its timeout."""
    app, asked = classic_server()
    server = await aiohttp_server(app)
    async with BootstrapClient(url_of(server)) as client:
        with pytest.raises(RankNotRegistered) as caught:
            await client.get(3, timeout=0.5)
    assert caught.value.ranks == (3,)
    # Back-off from 50-100 ms doubling: at most 5 requests in half a second; a hot loop sends thousands.
    assert 2 <= len(asked) <= 8


async def test_a_server_that_does_not_wait_still_answers_a_get(aiohttp_server: ServerFactory) -> None:
    """Backing off from a polling server, get still returns the info once the server has it."""
    app, asked = classic_server(answer_after=3)
    server = await aiohttp_server(app)
    async with BootstrapClient(url_of(server)) as client:
        info = await asyncio.wait_for(client.get(1, timeout=GUARD), GUARD)
    assert info.session_id == "s1"
    assert len(asked) == 4


async def test_an_old_servers_404_sentence_is_not_registered(aiohttp_server: ServerFactory) -> None:
    """An old server's 404 (only SPEC's sentence, no "missing") counts as "not registered"."""
    app, _ = classic_server()
    server = await aiohttp_server(app)
    async with BootstrapClient(url_of(server)) as client:
        with pytest.raises(RankNotRegistered):
            await client.get(3, timeout=0)


@pytest.mark.parametrize(
    "page",
    [
        web.json_response({"detail": "Not Found"}, status=404),
        web.Response(text="<html><body>404 Not Found</body></html>", status=404, content_type="text/html"),
        web.json_response({"detail": "No transfer engine info for rank 3 (cached)"}, status=404),
    ],
    ids=["framework-json", "proxy-html", "near-sentence"],
)
async def test_another_404_is_an_unexpected_reply_raised_at_once(
    aiohttp_server: ServerFactory, page: web.Response
) -> None:
    """A 404 that does not say "rank not registered" (a proxy's page, an unknown route) raises at once."""

    async def anything(request: web.Request) -> web.Response:
        return page

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", anything)
    server = await aiohttp_server(app)
    async with BootstrapClient(url_of(server)) as client:
        with pytest.raises(UnexpectedReply) as caught:
            await asyncio.wait_for(client.get(3, timeout=GUARD * 6), GUARD)
    assert not isinstance(caught.value, RankNotRegistered)


async def test_a_wrong_base_url_is_not_rank_not_registered(aiohttp_server: ServerFactory) -> None:
    """A base URL with a wrong path gets the server's "no such route" 404: UnexpectedReply naming the URL."""
    server, _ = await start(aiohttp_server)
    async with BootstrapClient(url_of(server) + "/api/v1") as client:
        with pytest.raises(UnexpectedReply, match="/api/v1/get_transfer_engine_info") as caught:
            await asyncio.wait_for(client.get(3, timeout=GUARD * 6), GUARD)
        assert not isinstance(caught.value, RankNotRegistered)
        with pytest.raises(UnexpectedReply):
            await client.get_many([0, 1], timeout=0)
        with pytest.raises(UnexpectedReply):
            await client.unregister(0)


async def test_a_rank_404_says_which_ranks_are_missing(aiohttp_server: ServerFactory) -> None:
    """A get's 404 names its rank in "missing", as a batch's does, beside SPEC's sentence."""
    server, _ = await start(aiohttp_server)
    async with aiohttp.ClientSession() as session:
        async with session.get(url_of(server) + "/get_transfer_engine_info?rank=3") as response:
            assert response.status == 404
            assert await response.json() == {"detail": "No transfer engine info for rank 3", "missing": [3]}
        async with session.delete(url_of(server) + "/register_transfer_engine_info?rank=4") as response:
            assert (response.status, (await response.json())["missing"]) == (404, [4])


async def test_failover_from_a_dead_url_to_a_live_one(aiohttp_server: ServerFactory) -> None:
    """Given a dead replica and a live one, calls move to the live one and stay there."""
    server, seen = await start(aiohttp_server)
    dead = f"http://127.0.0.1:{free_port()}"
    async with BootstrapClient([dead, url_of(server)]) as client:
        assert client.urls == (dead, url_of(server))
        await client.register(0, session_id="s", weights_info_dict={}, timeout=GUARD)
        assert client.url == url_of(server)
        assert (await client.get(0, timeout=GUARD)).session_id == "s"
        assert await client.health()
    assert len(seen.requests) == 3


async def test_failover_gives_up_as_server_unavailable_when_every_url_is_dead() -> None:
    """With every replica dead, a call tries each, backs off, and ends as ServerUnavailable naming them all."""
    dead = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    async with BootstrapClient(dead, backoff=FAST) as client:
        with pytest.raises(ServerUnavailable, match="None of the servers") as caught:
            await client.get(0, timeout=0.05)
        assert not await client.health()
    assert all(url in caught.value.detail for url in dead)


async def test_a_list_of_no_urls_is_refused() -> None:
    """BootstrapClient([]) is a ValueError at once, not a client that can never connect."""
    with pytest.raises(ValueError, match="at least one"):
        BootstrapClient([])


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:1", "htp://127.0.0.1:1", "http://"])
async def test_a_url_that_is_not_http_is_refused_when_the_client_is_made(url: str) -> None:
    """A client for a non-HTTP URL is a ValueError at once, not a call that fails later (or retries for ever)."""
    with pytest.raises(ValueError, match="give an http:// or https:// URL"):
        BootstrapClient(url)
    with pytest.raises(ValueError, match="not a server URL"):
        BootstrapClient(["http://127.0.0.1:1", url])


@pytest.mark.parametrize("url", ["127.0.0.1:45377", "localhost:6789"])
def test_an_address_without_its_scheme_is_refused_with_the_url_to_give(url: str) -> None:
    """``BootstrapClient("127.0.0.1:45377")`` says at once which URL to give, not "Invalid server URL" at the first call."""
    with pytest.raises(ValueError, match=f"such as http://{url}"):
        BootstrapClient(url)
    with pytest.raises(ValueError, match=f"such as http://{url}"):
        SyncBootstrapClient(url)


@pytest.mark.parametrize(
    ("rank", "error"), [("0", TypeError), (True, TypeError), (1.0, TypeError), (-1, ValueError)]
)
async def test_a_rank_that_is_not_one_is_refused_before_any_request(
    rank: object, error: type[Exception]
) -> None:
    """``client.get("0")`` is a TypeError naming the value, not an UnexpectedReply about rank 0's own info."""
    async with BootstrapClient("http://127.0.0.1:9") as client:  # never asked: nothing listens there
        for call in (
            client.get(rank, timeout=0),  # type: ignore[arg-type]
            client.get_many([0, rank], timeout=0),  # type: ignore[list-item]
            client.register(rank, session_id="10.0.0.7:18000", weights_info_dict={}, timeout=0),  # type: ignore[arg-type]
            client.unregister(rank, timeout=0),  # type: ignore[arg-type]
        ):
            with pytest.raises(error, match="rank"):
                await call
