"""The clients' leases: granted and kept alive in the background, revoked on exit, granted again when lost."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from aiohttp import web

from aiobootstrap import (
    BootstrapClient,
    ServerConfig,
    SyncBootstrapClient,
    ThreadedBootstrapServer,
    create_app,
)
from aiobootstrap.exceptions import BadRequest, BootstrapError, LeasesUnsupported, TooManyLeases
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.store import MemoryStore

from .helpers.registry import info_key
from .helpers.waits import until


async def _served(aiohttp_server: Any) -> tuple[str, MemoryStore]:
    server = await aiohttp_server(create_app(ServerConfig()))
    store = server.app[REGISTRY].store
    assert isinstance(store, MemoryStore)
    return str(server.make_url("")).rstrip("/"), store


async def test_a_lease_is_granted_kept_alive_and_revoked_on_exit(aiohttp_server: Any) -> None:
    """Records of every kind on the lease; keepalives renew it; leaving the block deletes them all."""
    url, store = await _served(aiohttp_server)
    async with BootstrapClient(url) as client:
        async with client.lease(ttl=1.0) as lease:
            await client.register(0, session_id="s0", lease=lease, weights_info_dict={})
            await client.register_parallelism_config(0, {"tp": 2}, lease=lease)
            await client.register_encoder_url("http://e1", lease=lease)
            held = store.lease_table.live(lease.id)
            assert held is not None
            first_deadline = held.deadline
            # A keepalive at a third of the TTL moves the deadline on.
            await until(lambda: held.deadline > first_deadline)
            assert len((await store.read_lease("default", lease.id)).records) == 3
            read = await lease.read()
            assert read.lease == lease.id
            assert read.ttl == 1.0
            assert read.remaining is not None
            assert 0 < read.remaining <= 1.0
            assert [record.kind for record in read.records] == [
                "transfer_engine_info",
                "parallelism_config",
                "encoder_urls",
            ]
            assert read.records[2].url == "http://e1"
        assert not lease.held
        assert len(store.lease_table) == 0
        assert store.peek(info_key(0)) is None
        assert await client.list_encoder_urls() == []


async def test_a_lost_lease_is_granted_again_and_its_records_registered_again(
    aiohttp_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The server forgets the lease (revoked behind the client's back): one WARNING, a new lease, the same records."""
    url, store = await _served(aiohttp_server)
    async with BootstrapClient(url) as client, client.lease(ttl=1.0) as lease:
        await client.register(1, session_id="s1", lease=lease, weights_info_dict={})
        await client.register(2, session_id="s2", lease=lease, weights_info_dict={})
        await client.unregister(2)  # forgotten: not registered again
        lost = lease.id
        caplog.set_level(logging.WARNING, logger="aiobootstrap.client")
        await store.revoke_lease("default", lost)
        assert store.peek(info_key(1)) is None
        await until(lambda: lease.regrants == 1 and store.peek(info_key(1)) is not None)
        assert lease.id != lost
        assert [key.rank for key, _ in (await store.read_lease("default", lease.id)).records] == [1]
        assert store.peek(info_key(2)) is None
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "was gone" in r.message]
        assert len(warnings) == 1


async def test_a_register_on_a_lost_lease_grants_it_again(aiohttp_server: Any) -> None:
    url, store = await _served(aiohttp_server)
    async with BootstrapClient(url) as client, client.lease(ttl=30.0) as lease:
        lost = lease.id
        await store.revoke_lease("default", lost)
        await client.register(3, session_id="s3", lease=lease, weights_info_dict={})
        assert lease.id != lost
        assert lease.regrants == 1
        assert store.lease_table.lease_of((info_key(3), None)) is not None


async def test_a_lease_outside_its_block_is_refused(aiohttp_server: Any) -> None:
    url, _ = await _served(aiohttp_server)
    async with BootstrapClient(url) as client:
        lease = client.lease(ttl=5.0)
        with pytest.raises(BootstrapError, match="not granted"):
            await client.register(4, session_id="s4", lease=lease, weights_info_dict={})


def test_the_sync_client_holds_a_lease_as_a_plain_context_manager() -> None:
    with ThreadedBootstrapServer(port=0) as server, SyncBootstrapClient(server.url) as client:
        with client.lease(ttl=1.0) as lease:
            client.register(5, session_id="s5", lease=lease, weights_info_dict={})
            client.register_encoder_url("http://e5", lease=lease)
            assert server.get_transfer_engine_info(5) is not None
        assert server.get_transfer_engine_info(5) is None
        assert client.list_encoder_urls() == []


async def test_the_client_raises_the_lease_errors(aiohttp_server: Any) -> None:
    """Past --max-leases: TooManyLeases; a server whose store holds no leases (501): LeasesUnsupported; bad ttl."""
    server = await aiohttp_server(create_app(ServerConfig(max_leases=1)))
    async with BootstrapClient(str(server.make_url("")).rstrip("/")) as client, client.lease(ttl=5):
        with pytest.raises(TooManyLeases):
            await client.lease(ttl=5).__aenter__()
        with pytest.raises(BadRequest):
            await client.lease(ttl=0.5).__aenter__()

    async def unsupported(request: web.Request) -> web.Response:
        return web.json_response({"detail": "Leases are not supported on this store."}, status=501)

    # Every store holds leases now; an older server (or a store without them) still answers 501.
    app = web.Application()
    app.router.add_post("/leases", unsupported)
    server = await aiohttp_server(app)
    async with BootstrapClient(str(server.make_url("")).rstrip("/")) as client:
        with pytest.raises(LeasesUnsupported):
            await client.lease(ttl=5).__aenter__()
