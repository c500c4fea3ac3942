"""Deregistration: DELETE /register_transfer_engine_info?rank=N and the client's unregister()."""

from __future__ import annotations

import asyncio

import pytest

from aiobootstrap import BootstrapClient, BootstrapServer, ServerConfig, create_app
from aiobootstrap.server.app import REGISTRY

from .helpers.registry import stored
from .helpers.waits import GUARD, until

PATH = "/register_transfer_engine_info"


def _body(rank: int, session_id: str = "s") -> dict[str, object]:
    return {"rank": rank, "transfer_engine_info": {"session_id": session_id, "weights_info_dict": {}}}


@pytest.fixture
async def client(aiohttp_client):
    return await aiohttp_client(
        create_app(ServerConfig(world_size=8)), server_kwargs={"handler_cancellation": True}
    )


async def test_delete_removes_a_rank(client):
    """DELETE answers 200 OK; the rank is gone from get and the listing, and the version moves on."""
    assert (await client.put(PATH, json=_body(3))).status == 200
    response = await client.delete(f"{PATH}?rank=3")
    assert response.status == 200
    assert await response.text() == "OK"
    get = await client.get("/get_transfer_engine_info?rank=3")
    assert get.status == 404
    listing = await (await client.get("/ranks")).json()
    assert listing["count"] == 0
    assert listing["version"] == 2
    assert 3 in listing["missing"]


async def test_delete_of_an_unregistered_rank_is_404(client):
    """Nothing to remove is a 404 with the get route's detail, and changes nothing."""
    response = await client.delete(f"{PATH}?rank=4")
    assert response.status == 404
    assert (await response.json())["detail"] == "No transfer engine info for rank 4"
    assert (await (await client.get("/ranks")).json())["version"] == 0


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("", "Missing rank parameter"),
        ("?rank=-1", "Invalid rank parameter"),
        ("?rank=x", "Invalid rank parameter"),
        ("?rank=1&rank=2", "more than once"),
        ("?rank=8", "outside the world size 8"),
    ],
)
async def test_delete_checks_its_rank(client, query, detail):
    """A bad or out-of-world rank is a 400 naming the problem, and nothing is removed."""
    await client.put(PATH, json=_body(1))
    response = await client.delete(PATH + query)
    assert response.status == 400
    assert detail in (await response.json())["detail"]
    assert await stored(client.app[REGISTRY], 1) is not None


async def test_waiters_keep_waiting_after_a_delete(client):
    """A parked get for a deleted rank is not woken by the delete and gets the next registration."""
    await client.put(PATH, json=_body(2, "first"))
    registry = client.app[REGISTRY]
    waiter = asyncio.create_task(client.get("/get_transfer_engine_info?rank=2&wait=30&after=1"))
    await until(lambda: registry.parked == 1)
    assert (await client.delete(f"{PATH}?rank=2")).status == 200
    assert registry.parked == 1
    assert not waiter.done()
    await client.put(PATH, json=_body(2, "second"))
    response = await asyncio.wait_for(waiter, GUARD)
    reply = await response.json()
    assert reply["remote_instance_transfer_engine_info"][0] == "second"
    assert reply["version"] == 3


async def test_other_methods_list_delete_as_allowed(client):
    """A POST to the register route is a 405 whose Allow header names PUT and DELETE."""
    response = await client.post(PATH, json=_body(0))
    assert response.status == 405
    assert {"PUT", "DELETE"} <= {m.strip() for m in response.headers["Allow"].split(",")}


async def test_client_unregister():
    """unregister() is True when it removed info, False when there was none, and waiters keep waiting."""
    async with BootstrapServer(port=0) as server, BootstrapClient(server.url) as client:
        await client.register(0, session_id="s", weights_info_dict={})
        assert await client.unregister(0) is True
        assert await client.unregister(0) is False
        assert await stored(server.registry, 0) is None


async def test_delete_in_a_namespace_removes_only_there(client):
    """DELETE under /ns/{namespace} removes the rank from that namespace and no other."""
    for prefix in ("", "/ns/a", "/ns/b"):
        assert (await client.put(prefix + PATH, json=_body(1, prefix or "default"))).status == 200
    assert (await client.delete(f"/ns/a{PATH}?rank=1")).status == 200
    assert (await client.get("/ns/a/get_transfer_engine_info?rank=1")).status == 404
    for prefix in ("", "/ns/b"):
        reply = await (await client.get(f"{prefix}/get_transfer_engine_info?rank=1")).json()
        assert reply["remote_instance_transfer_engine_info"][0] == (prefix or "default")


async def test_delete_is_logged_like_a_registration(client, caplog):
    """A deletion logs one line naming rank, session, version and namespace, with the same fields."""
    caplog.set_level("INFO", logger="aiobootstrap")
    assert (await client.put(f"/ns/prefill{PATH}", json=_body(2, "10.0.0.2:1"))).status == 200
    assert (await client.delete(f"/ns/prefill{PATH}?rank=2")).status == 200
    [line] = [record for record in caplog.records if record.getMessage().startswith("unregistered")]
    assert line.getMessage() == "unregistered rank 2 session 10.0.0.2:1 version 1 in namespace prefill"
    assert (line.rank, line.session_id, line.namespace) == (2, "10.0.0.2:1", "prefill")
