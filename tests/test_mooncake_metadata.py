"""Mooncake's metadata server protocol (``/metadata?key=``) on the registry, over the memory store and
Redis: Mooncake's replies, values byte for byte, the RPC entry that is never taken over (atomic across
replicas), waits, versions, leases and watch."""

from __future__ import annotations

import asyncio
import dataclasses
import io
from typing import Any
from urllib.parse import quote

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.appkeys import CONFIG, HISTORY, REGISTRY

from .helpers.waits import GUARD, until

RPC = "/metadata?key=" + quote("mooncake/rpc_meta/127.0.0.1:53925", safe="")
RAM = "/metadata?key=" + quote("mooncake/ram/127.0.0.1:53925", safe="")
ADDRESS = b'{"ip_or_host_name":"127.0.0.1","rpc_port":15868}'


async def _text(reply: Any) -> tuple[int, str]:
    return reply.status, await reply.text()


async def test_mooncakes_replies_and_values_byte_for_byte(client: Any) -> None:
    """PUT 200 metadata updated, GET 200 application/json with the very bytes (not UTF-8 ones too), DELETE
    200 metadata deleted, then 404 metadata not found; a missing key is the 400 text."""
    descriptor = b'{"name":"127.0.0.1:53925","buffers":[{"addr":1,"length":4096}],"protocol":"tcp"}'
    assert await _text(await client.put(RAM, data=descriptor)) == (200, "metadata updated")
    reply = await client.get(RAM)
    assert (reply.status, reply.content_type, await reply.read()) == (200, "application/json", descriptor)
    assert reply.headers["X-Aiobootstrap-Version"] == "1"
    raw = bytes(range(256))
    assert (await client.put("/metadata?key=blob", data=raw)).status == 200
    assert await (await client.get("/metadata?key=blob")).read() == raw
    assert await _text(await client.delete(RAM)) == (200, "metadata deleted")
    assert await _text(await client.get(RAM)) == (404, "metadata not found")
    assert await _text(await client.delete(RAM)) == (404, "metadata not found")
    for method in ("GET", "PUT", "DELETE"):
        assert await _text(await client.request(method, "/metadata")) == (400, "metadata key is required")
        assert await _text(await client.request(method, "/metadata?key=")) == (
            400,
            "metadata key is required",
        )
    assert (await client.post(RAM, data=b"x")).status == 405


async def test_an_rpc_entry_is_not_taken_over(client: Any) -> None:
    """Another engine's address under the same rpc_meta key: Mooncake's 400, nothing changed; the same
    value again: 200 metadata unchanged. Other keys are overwritten."""
    assert await _text(await client.put(RPC, data=ADDRESS)) == (200, "metadata updated")
    assert await _text(await client.put(RPC, data=ADDRESS)) == (200, "metadata unchanged")
    other = b'{"ip_or_host_name":"10.0.0.9","rpc_port":1}'
    assert await _text(await client.put(RPC, data=other)) == (400, "Duplicate rpc_meta key not allowed")
    assert await (await client.get(RPC)).read() == ADDRESS
    await client.put(RAM, data=b"1")
    await client.put(RAM, data=b"2")
    assert await (await client.get(RAM)).read() == b"2"


async def test_a_wait_for_a_key_and_for_its_change(client: Any) -> None:
    """wait=S holds a GET until the key exists; after=V until it changes after V."""
    registry = client.app[REGISTRY]
    waiting = asyncio.create_task(client.get(f"{RAM}&wait=60"))
    await until(lambda: registry.parked >= 1)
    await client.put(RAM, data=b"first")
    reply = await asyncio.wait_for(waiting, GUARD)
    assert await reply.read() == b"first"
    version = reply.headers["X-Aiobootstrap-Version"]
    changed = asyncio.create_task(client.get(f"{RAM}&wait=60&after={version}"))
    await until(lambda: registry.parked >= 1)
    await client.put(RAM, data=b"second")
    assert await (await asyncio.wait_for(changed, GUARD)).read() == b"second"
    assert await _text(await client.get("/metadata?key=never&wait=0.05")) == (404, "metadata not found")


async def test_a_key_on_a_lease_leaves_with_it_and_is_a_watch_change(client: Any) -> None:
    lease = (await (await client.post("/leases", json={"ttl": 30})).json())["lease"]
    assert (await client.put(RAM, data=b"d", headers={"X-Aiobootstrap-Lease": lease})).status == 200
    assert (await client.put(RPC, data=ADDRESS, headers={"X-Aiobootstrap-Lease": "no-such"})).status == 404
    assert (await client.delete(f"/leases/{lease}")).status == 200
    assert (await client.get(RAM)).status == 404
    history = client.app[HISTORY]
    await until(lambda: (history.latest("default") or 0) >= 2)
    changes = (await (await client.get("/watch?after=0")).json())["changes"]
    assert [(c["op"], c["kind"], c["key"]) for c in changes] == [
        ("put", "metadata", "mooncake/ram/127.0.0.1:53925"),
        ("delete", "metadata", "mooncake/ram/127.0.0.1:53925"),
    ]


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
@pytest.mark.parametrize("config", [ServerConfig(max_body_size=8 * 1024 * 1024)])
async def test_a_value_past_a_mebibyte_with_expect_100_continue(client: Any) -> None:
    """Mooncake's server refuses bodies over 1 MiB, which libcurl sends with Expect: 100-continue: here they
    are taken up to the body limit."""
    big = b"[" + b"1," * (1024 * 1024) + b"1]"
    reply = await client.put(RAM, data=io.BytesIO(big), headers={"Expect": "100-continue"})
    assert (reply.status, await reply.text()) == (200, "metadata updated")
    assert await (await client.get(RAM)).read() == big


@pytest.mark.parametrize("store_kind", ["redis"], indirect=True)
async def test_two_replicas_let_one_engine_take_an_rpc_entry(
    client: Any, aiohttp_client: Any, config: ServerConfig
) -> None:
    """Engines of the same name racing through two replicas: exactly one is stored, the others refused."""
    own = client.app[CONFIG]
    other = await aiohttp_client(
        create_app(dataclasses.replace(config, store=own.store, store_prefix=own.store_prefix))
    )
    bodies = [b'{"ip_or_host_name":"10.0.0.%d","rpc_port":1}' % n for n in range(8)]
    replies = await asyncio.gather(*(
        (client if n % 2 else other).put(RPC, data=body) for n, body in enumerate(bodies)
    ))  # fmt: skip
    texts = [await reply.text() for reply in replies]
    assert texts.count("metadata updated") == 1, texts
    assert texts.count("Duplicate rpc_meta key not allowed") == 7, texts
    stored = await (await other.get(RPC)).read()
    assert stored == bodies[texts.index("metadata updated")]


async def test_the_listing_pairs_each_engines_address_and_segment(client: Any) -> None:
    """GET /mooncake: one entry per engine, its RPC address beside its segment's buffers, cluster prefix
    or not; a key of neither kind counts among the keys only."""
    assert (await client.put(RPC, data=ADDRESS)).status == 200
    descriptor = b'{"name":"127.0.0.1:53925","protocol":"tcp","buffers":[{"addr":1},{"addr":2}]}'
    assert (await client.put(RAM, data=descriptor)).status == 200
    assert (await client.put("/metadata?key=c1/mooncake/ram/10.0.0.9:1", data=b"{}")).status == 200
    assert (await client.put("/metadata?key=other", data=b"x")).status == 200
    listing = await (await client.get("/mooncake")).json()
    assert (listing["keys"], listing["engine_count"], listing["probing"]) == (4, 2, False)
    first, second = listing["engines"]
    assert (first["name"], first["rpc"], first["segment"], first["buffers"], first["protocol"]) == (
        "10.0.0.9:1",
        None,
        True,
        None,
        None,
    )
    assert second["name"] == "127.0.0.1:53925"
    assert second["rpc"] == {"ip_or_host_name": "127.0.0.1", "rpc_port": 15868}
    assert (second["segment"], second["buffers"], second["protocol"]) == (True, 2, "tcp")


async def test_a_watch_filters_the_faces_named_kinds(client: Any) -> None:
    """/watch?kind=metadata (or a prefill kind) selects a face's named records; a role or ranks filter leaves
    them out, as it leaves out the encoder list's changes; an unknown kind is still a 400."""
    assert (await client.put(RAM, data=b"{}")).status == 200
    assert (
        await client.put(
            "/register_transfer_engine_info",
            json={"rank": 0, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {}}},
        )
    ).status == 200
    history = client.app[HISTORY]
    await until(lambda: (history.latest("default") or 0) >= 2)
    changes = (await (await client.get("/watch?after=0&kind=metadata")).json())["changes"]
    assert [(c["kind"], c["key"]) for c in changes] == [("metadata", "mooncake/ram/127.0.0.1:53925")]
    assert (await (await client.get("/watch?after=0&kind=metadata&role=target")).json())["changes"] == []
    assert (await (await client.get("/watch?after=0&kind=prefill_rank")).json())["changes"] == []
    assert (await client.get("/watch?after=0&kind=bogus")).status == 400
