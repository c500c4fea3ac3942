"""Namespaces: one server, several deployments, each with its own ranks, versions and waiters."""

from __future__ import annotations

import asyncio

import pytest
from pytest_aiohttp import AiohttpClient, AiohttpServer

from aiobootstrap import (
    BootstrapClient,
    RankNotRegistered,
    ServerConfig,
    create_app,
)
from aiobootstrap.exceptions import BadRequest, ShuttingDown, UnexpectedReply
from aiobootstrap.server.app import REGISTRY, _namespaced, _routes
from aiobootstrap.wire.results import decode_namespaces
from aiobootstrap.wire.routes import check_namespace, path

from .helpers.registry import info_key, open_registry, stored
from .helpers.waits import GUARD, until

BAD_NAMES = ["", "-lead", ".lead", "a/b", "a b", "x" * 64, "caf\u00e9", "line\n", "a%2Fb", "{namespace}"]


# -- names and waiting, without HTTP ---------------------------------------


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_are_refused(name: str) -> None:
    """A name that is not path- and label-safe is a BadRequest naming it."""
    with pytest.raises(BadRequest, match="Invalid namespace"):
        check_namespace(name)


@pytest.mark.parametrize("name", ["a", "A9", "prefill-0", "team.model_v2", "x" * 63, "0"])
def test_good_names_are_accepted(name: str) -> None:
    """Letters, digits, '.', '_' and '-' up to 63 characters, starting with a letter or digit."""
    assert check_namespace(name) == name


async def test_the_same_rank_in_two_namespaces_is_two_records() -> None:
    """A rank registered in one namespace is not there in another, and wakes only its own waiters."""
    registry = await open_registry()
    other = asyncio.create_task(registry.wait(info_key(3, "decode-0"), timeout=GUARD))
    await until(lambda: registry.parked == 1)
    await registry.register(info_key(3, "prefill-0"), {"session_id": "p", "weights_info_dict": {}})
    assert await stored(registry, 3, "prefill-0") is not None
    assert await stored(registry, 3) is None
    assert not other.done()
    other.cancel()
    await asyncio.wait({other})


async def test_probing_random_namespaces_leaves_nothing_behind() -> None:
    """Waits that run out in ten thousand distinct namespaces leave no namespace and no waitlist."""
    registry = await open_registry()
    await asyncio.gather(*(registry.wait(info_key(0, f"probe-{i}"), timeout=0.001) for i in range(10_000)))
    assert registry.parked_namespaces() == []
    assert registry.waiting_keys == 0
    assert await registry.store.namespaces() == []


async def test_close_answers_waits_in_every_namespace_and_refuses_new_ones() -> None:
    """Shutdown wakes parked waits of all namespaces with ShuttingDown, and refuses new waits."""
    registry = await open_registry()
    waiters = [
        asyncio.create_task(registry.wait(info_key(0, name), timeout=GUARD)) for name in ("default", "a", "b")
    ]
    await until(lambda: registry.parked == 3)
    registry.close()
    results = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), GUARD)
    assert all(isinstance(result, ShuttingDown) for result in results)
    with pytest.raises(ShuttingDown):
        await registry.wait(info_key(0, "late"), timeout=GUARD)


# -- over HTTP ----------------------------------------------------------


def test_every_route_in_the_route_table_is_served_under_the_namespace_prefix() -> None:
    """Each bootstrap route has a /ns/{namespace} twin with the same methods: routes added later too."""
    app = create_app()
    served = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
    }
    for route in _routes():
        assert (route.method, route.path) in served
        assert (route.method, "/ns/{namespace}" + route.path) in served
    assert [route.path for route in _namespaced(_routes())] == [
        path(route.path, "{namespace}") for route in _routes()
    ]


async def test_the_same_rank_in_two_namespaces_stays_apart(aiohttp_client: AiohttpClient) -> None:
    """A rank registered under /ns/a is not seen under /ns/b nor by unprefixed (default) requests."""
    client = await aiohttp_client(create_app())
    body = {"rank": 0, "transfer_engine_info": {"session_id": "a0", "weights_info_dict": {}}}
    assert (await client.put("/ns/a/register_transfer_engine_info", json=body)).status == 200
    reply = await client.get("/ns/a/get_transfer_engine_info", params={"rank": "0"})
    assert reply.status == 200
    assert (await reply.json())["remote_instance_transfer_engine_info"][0] == "a0"
    for route in ("/ns/b/get_transfer_engine_info", "/get_transfer_engine_info"):
        reply = await client.get(route, params={"rank": "0"})
        assert reply.status == 404
        assert (await reply.json())["detail"] == "No transfer engine info for rank 0"


async def test_ns_default_is_the_unprefixed_namespace(aiohttp_client: AiohttpClient) -> None:
    """/ns/default/... and the unprefixed routes address the same registry."""
    client = await aiohttp_client(create_app())
    body = {"rank": 5, "transfer_engine_info": {"session_id": "d5", "weights_info_dict": {}}}
    assert (await client.put("/register_transfer_engine_info", json=body)).status == 200
    reply = await client.get("/ns/default/get_transfer_engine_info", params={"rank": "5"})
    assert reply.status == 200
    assert (await client.get("/ns/default/ranks")).status == 200
    assert await client.app[REGISTRY].store.namespaces() == ["default"]


async def test_a_bad_namespace_is_a_400_that_stores_nothing(aiohttp_client: AiohttpClient) -> None:
    """An invalid name in the prefix is a 400 with a detail, and neither makes a namespace nor registers."""
    client = await aiohttp_client(create_app())
    body = {"rank": 0, "transfer_engine_info": {"session_id": "x", "weights_info_dict": {}}}
    reply = await client.put("/ns/-bad/register_transfer_engine_info", json=body)
    assert reply.status == 400
    assert "Invalid namespace" in (await reply.json())["detail"]
    reply = await client.get("/ns/" + "x" * 64 + "/get_transfer_engine_info", params={"rank": "0"})
    assert reply.status == 400
    assert await client.app[REGISTRY].store.namespaces() == []


async def test_a_waiter_is_woken_only_by_its_own_namespace(aiohttp_client: AiohttpClient) -> None:
    """A get parked under /ns/a ignores a registration of its rank elsewhere and wakes on its own."""
    client = await aiohttp_client(create_app(), server_kwargs={"handler_cancellation": True})
    waiter = asyncio.create_task(
        client.get("/ns/a/get_transfer_engine_info", params={"rank": "2", "wait": str(GUARD)})
    )
    registry = client.app[REGISTRY]
    await until(lambda: registry.parked_in("a") == 1)
    elsewhere = {"rank": 2, "transfer_engine_info": {"session_id": "elsewhere", "weights_info_dict": {}}}
    await client.put("/ns/b/register_transfer_engine_info", json=elsewhere)
    await client.put("/register_transfer_engine_info", json=elsewhere)
    assert registry.parked_in("a") == 1
    mine = {"rank": 2, "transfer_engine_info": {"session_id": "mine", "weights_info_dict": {}}}
    await client.put("/ns/a/register_transfer_engine_info", json=mine)
    reply = await asyncio.wait_for(waiter, GUARD)
    assert reply.status == 200
    assert (await reply.json())["remote_instance_transfer_engine_info"][0] == "mine"


async def test_world_size_applies_in_each_namespace(aiohttp_client: AiohttpClient) -> None:
    """--world-size bounds the ranks of every namespace, not the sum of them."""
    client = await aiohttp_client(create_app(ServerConfig(world_size=2)))
    for prefix in ("", "/ns/a", "/ns/b"):
        for rank, status in ((1, 200), (2, 400)):
            body = {"rank": rank, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {}}}
            reply = await client.put(prefix + "/register_transfer_engine_info", json=body)
            assert reply.status == status


async def test_the_namespace_limit_is_a_503_with_a_detail(aiohttp_client: AiohttpClient) -> None:
    """With --max-namespaces reached by namespaces holding ranks, a new name gets 503 naming the limit."""
    client = await aiohttp_client(create_app(ServerConfig(max_namespaces=1)))
    body = {"rank": 0, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {}}}
    assert (await client.put("/ns/a/register_transfer_engine_info", json=body)).status == 200
    reply = await client.put("/ns/b/register_transfer_engine_info", json=body)
    assert reply.status == 503
    assert "--max-namespaces" in (await reply.json())["detail"]


async def test_max_waiters_counts_waits_in_every_namespace(aiohttp_client: AiohttpClient) -> None:
    """--max-waiters is server-wide: a wait parked in /ns/a fills it for /ns/b; a hit still answers."""
    client = await aiohttp_client(
        create_app(ServerConfig(max_waiters=1)), server_kwargs={"handler_cancellation": True}
    )
    registry = client.app[REGISTRY]
    waiter = asyncio.create_task(
        client.get("/ns/a/get_transfer_engine_info", params={"rank": "0", "wait": str(GUARD)})
    )
    await until(lambda: registry.parked == 1)
    reply = await client.get("/ns/b/get_transfer_engine_info", params={"rank": "0", "wait": "5"})
    assert reply.status == 503
    assert "Retry-After" in reply.headers
    body = {"rank": 0, "transfer_engine_info": {"session_id": "b0", "weights_info_dict": {}}}
    await client.put("/ns/b/register_transfer_engine_info", json=body)
    reply = await client.get("/ns/b/get_transfer_engine_info", params={"rank": "0", "wait": "5"})
    assert reply.status == 200
    waiter.cancel()
    await asyncio.wait({waiter})


async def test_client_namespace_addresses_its_deployment(aiohttp_server: AiohttpServer) -> None:
    """BootstrapClient(namespace=...) registers and gets (one and many) in its namespace only."""
    server = await aiohttp_server(create_app())
    url = str(server.make_url(""))
    async with (
        BootstrapClient(url, namespace="prefill-0") as prefill,
        BootstrapClient(url) as default,
    ):
        await prefill.register(0, session_id="p0", weights_info_dict={"w": 1})
        await prefill.register(1, session_id="p1", weights_info_dict={})
        assert (await prefill.get(0, timeout=0)).session_id == "p0"
        assert set(await prefill.get_many([0, 1], timeout=0)) == {0, 1}
        assert [rank.rank for rank in (await prefill.list_ranks()).ranks] == [0, 1]
        with pytest.raises(RankNotRegistered):
            await default.get(0, timeout=0)
        assert await stored(server.app[REGISTRY], 0) is None


def test_client_refuses_a_bad_namespace() -> None:
    """A namespace the server would refuse is refused when the client is made."""
    with pytest.raises(BadRequest, match="Invalid namespace"):
        BootstrapClient("http://127.0.0.1:1", namespace="a/b")


async def test_shutdown_answers_parked_waits_in_namespaces_with_503(aiohttp_client: AiohttpClient) -> None:
    """Stopping the server answers a get parked in a namespace with 503, at once."""
    client = await aiohttp_client(create_app(), server_kwargs={"handler_cancellation": True})
    registry = client.app[REGISTRY]
    waiter = asyncio.create_task(
        client.get("/ns/a/get_transfer_engine_info", params={"rank": "0", "wait": str(GUARD)})
    )
    await until(lambda: registry.parked == 1)
    await client.server.close()
    reply = await asyncio.wait_for(waiter, GUARD)
    assert reply.status == 503
    assert "shutting down" in (await reply.json())["detail"]


# -- the namespace listing --------------------------------------------------


def test_server_wide_routes_are_never_prefixed() -> None:
    """/namespaces, /metrics, /ready and /openapi.json are the server's, whatever namespace a client addresses."""
    assert path("/namespaces", "team-a") == "/namespaces"
    assert path("/metrics", "team-a") == "/metrics"
    assert path("/ranks", "team-a") == "/ns/team-a/ranks"


async def test_the_client_lists_the_servers_namespaces(aiohttp_server: AiohttpServer) -> None:
    """list_namespaces names every namespace holding records or waiters, in order, from any namespace."""
    server = await aiohttp_server(create_app())
    url = str(server.make_url("")).rstrip("/")
    async with BootstrapClient(url, namespace="team-b") as team_b, BootstrapClient(url) as default:
        await team_b.register(0, session_id="s0", weights_info_dict={})
        await team_b.register(1, session_id="s1", weights_info_dict={})
        await default.register(0, session_id="s", weights_info_dict={})
        waiting = asyncio.create_task(team_b.get(7, timeout=30))
        await until(lambda: server.app[REGISTRY].parked_in("team-b") == 1)
        listed = await default.list_namespaces()
        waiting.cancel()
    assert [(each.name, each.ranks, each.version, each.waiters) for each in listed] == [
        ("default", 1, 1, 0),
        ("team-b", 2, 2, 1),
    ]


@pytest.mark.parametrize(
    "reply",
    [
        b'{"namespaces": [{"namespace": "a", "version": true, "ranks": 0, "waiters": 0}]}',
        b'{"namespaces": [{"namespace": 7, "version": 1, "ranks": 0, "waiters": 0}]}',
        b'{"namespaces": {"a": 1}}',
        b"[]",
    ],
)
def test_a_namespace_listing_that_is_not_one_is_not_believed(reply: bytes) -> None:
    """A reply of the wrong shape or types is UnexpectedReply, never a summary of made-up figures."""
    with pytest.raises(UnexpectedReply, match="not a namespace listing"):
        decode_namespaces(reply)
