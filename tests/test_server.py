"""BootstrapServer: serving inside the caller's event loop."""

from __future__ import annotations

import asyncio
import errno
import socket

import aiohttp
import pytest

from aiobootstrap import AddressInUse, BootstrapError, BootstrapServer

from .helpers.waits import GUARD, until


async def test_port_zero_serves_on_the_chosen_port() -> None:
    """port=0 binds a free port and url names the real one."""
    async with BootstrapServer(port=0) as server:
        assert server.port != 0
        assert server.url == f"http://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as session, session.get(server.url + "/health") as response:
            assert await response.text() == "OK"


async def test_taken_port_raises_address_in_use() -> None:
    """A port held by another socket fails at bind with AddressInUse naming host and port."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(AddressInUse) as caught:
            await BootstrapServer(port=port).start()
    assert caught.value.errno == errno.EADDRINUSE
    assert isinstance(caught.value, OSError)
    assert isinstance(caught.value, BootstrapError)
    assert f"127.0.0.1:{port}" in str(caught.value)
    # An embedder passed port=, not --port: the remedy is the CLI's only on the command line.
    assert str(caught.value).endswith("; pick another port.")


async def test_unknown_host_is_a_bootstrap_error() -> None:
    """A host that cannot be resolved or bound fails with one clear BootstrapError."""
    with pytest.raises(BootstrapError, match="Cannot listen on"):
        await BootstrapServer(host="256.0.0.1", port=0).start()


async def test_close_answers_parked_waits_with_503() -> None:
    """Stopping the server answers every parked long-poll with 503 at once."""
    server = BootstrapServer(port=0)
    await server.start()
    async with aiohttp.ClientSession() as session:

        async def wait_for_rank() -> tuple[int, dict[str, str]]:
            async with session.get(server.url + "/get_transfer_engine_info?rank=1&wait=60") as response:
                return response.status, await response.json()

        waiters = [asyncio.create_task(wait_for_rank()) for _ in range(5)]
        await until(lambda: server.registry.parked == 5)
        await asyncio.wait_for(server.close(), GUARD)
        replies = await asyncio.wait_for(asyncio.gather(*waiters), GUARD)
    for status, body in replies:
        assert status == 503
        assert "shutting down" in body["detail"]
