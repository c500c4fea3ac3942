"""The clients' Mooncake metadata calls (async and sync) against the real app: put, get, wait, delete,
byte for byte, and an RPC entry that is not taken over."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiobootstrap import BadRequest, BootstrapClient, NotRegistered, SyncBootstrapClient
from aiobootstrap.server.app import REGISTRY

RPC = "mooncake/rpc_meta/10.0.0.7:15868"


@pytest.fixture
def url(client: Any) -> str:
    return str(client.make_url("")).rstrip("/")


async def test_put_get_wait_and_delete(url: str) -> None:
    async with BootstrapClient(url, namespace="mc") as client:
        with pytest.raises(NotRegistered):
            await client.get_metadata("mooncake/ram/a")
        waiting = asyncio.create_task(client.wait_metadata("mooncake/ram/a", timeout=60))
        await asyncio.sleep(0)
        await client.put_metadata("mooncake/ram/a", b"\x00\xffdescriptor")
        value, version = await asyncio.wait_for(waiting, 30)
        assert (value, version > 0) == (b"\x00\xffdescriptor", True)
        assert await client.get_metadata("mooncake/ram/a") == b"\x00\xffdescriptor"
        await client.put_metadata(RPC, b'{"rpc_port":1}')
        with pytest.raises(BadRequest, match="Duplicate rpc_meta key not allowed"):
            await client.put_metadata(RPC, b'{"rpc_port":2}')
        assert await client.delete_metadata("mooncake/ram/a") is True
        assert await client.delete_metadata("mooncake/ram/a") is False
        with pytest.raises(NotRegistered):
            await client.wait_metadata("mooncake/ram/a", timeout=0.2)


async def test_the_sync_client(url: str) -> None:
    def blocking() -> bytes:
        with SyncBootstrapClient(url) as client:
            client.put_metadata("k", b"v")
            return client.get_metadata("k")

    assert await asyncio.to_thread(blocking) == b"v"


async def test_a_value_on_a_lease_leaves_with_it_and_is_put_again_on_a_regrant(client: Any, url: str) -> None:
    """``put_metadata(lease=)``: the key lives while the lease does; a lease found gone is granted again and
    its values put again (not one deleted meanwhile); the block's end revokes it, and its keys go."""
    store = client.server.app[REGISTRY].store
    async with BootstrapClient(url, namespace="mc") as mooncake, mooncake.lease(ttl=30) as lease:
        await mooncake.put_metadata("mooncake/ram/a", b'{"buffers":[]}', lease=lease)
        await mooncake.put_metadata("mooncake/ram/b", b"{}", lease=lease)
        assert await mooncake.delete_metadata("mooncake/ram/b") is True
        lost = lease.id
        await store.revoke_lease("mc", lost)
        with pytest.raises(NotRegistered):
            await mooncake.get_metadata("mooncake/ram/a")
        await lease.keepalive()
        assert (lease.id != lost, lease.regrants) == (True, 1)
        assert await mooncake.get_metadata("mooncake/ram/a") == b'{"buffers":[]}'
        with pytest.raises(NotRegistered):
            await mooncake.get_metadata("mooncake/ram/b")
        held = await lease.read()
        assert [record.key for record in held.records] == ["mooncake/ram/a"]
    async with BootstrapClient(url, namespace="mc") as mooncake:
        with pytest.raises(NotRegistered):
            await mooncake.get_metadata("mooncake/ram/a")


async def test_a_value_that_is_not_bytes_is_refused_not_stored_form_encoded(url: str) -> None:
    """``put_metadata(key, {"a": 1})`` is a TypeError naming the bytes to give; aiohttp would have sent the dict
    form-encoded (``a=1``) and stored that as the engine's metadata."""
    async with BootstrapClient(url, namespace="mc") as client:
        for value in ({"a": 1}, "text", [1]):
            with pytest.raises(TypeError, match=r"json\.dumps"):
                await client.put_metadata("mooncake/ram/a", value)  # type: ignore[arg-type]
        with pytest.raises(NotRegistered):
            await client.get_metadata("mooncake/ram/a")
        await client.put_metadata("mooncake/ram/a", b'{"a":1}')
        assert await client.get_metadata("mooncake/ram/a") == b'{"a":1}'
