"""A full connection table: idle connections are shed to let new clients in; requests in flight never are."""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import signal
import urllib.request

import aiohttp
import pytest

from aiobootstrap import BootstrapServer, ServerConfig
from aiobootstrap.cli.parser import server_config, server_parser

from .helpers.cli import serve
from .helpers.registry import info_key
from .helpers.waits import GUARD, until

HEALTH = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


async def _idle_connection(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A keep-alive connection that has been answered once and then sends nothing."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(HEALTH)
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
    assert head.startswith(b"HTTP/1.1 200")
    assert await asyncio.wait_for(reader.readexactly(2), GUARD) == b"OK"
    return reader, writer


async def _closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), GUARD) == b""
    except ConnectionResetError:
        return True


def _register(url: str, rank: int) -> int:
    body = json.dumps({"rank": rank, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {}}})
    request = urllib.request.Request(url + "/register_transfer_engine_info", data=body.encode(), method="PUT")
    with urllib.request.urlopen(request, timeout=GUARD) as response:
        return int(response.status)


async def test_a_full_table_sheds_the_longest_idle_connection_and_never_a_parked_wait() -> None:
    """--max-connections 64 and 70 idle connections: /health and a registration answer, the parked get is kept."""
    server = serve("--max-connections", "64", "--log-level", "warning")
    try:
        async with aiohttp.ClientSession() as session:
            parked = asyncio.create_task(session.get(f"{server.url}/get_transfer_engine_info?rank=5&wait=60"))
            async with asyncio.timeout(GUARD):
                while True:
                    async with session.get(server.url + "/ranks") as listing:
                        if (await listing.json())["waiters"] == 1:
                            break
            port = int(server.url.rsplit(":", 1)[1])
            idle = [await _idle_connection(port) for _ in range(70)]
            async with session.get(server.url + "/health") as health:
                assert await health.text() == "OK"
            assert await asyncio.to_thread(_register, server.url, 5) == 200
            reply = await asyncio.wait_for(parked, GUARD)
            assert reply.status == 200, "the parked get was answered, not shed"
            assert (await reply.json())["rank"] == 5
            assert await _closed_by_server(idle[0][0]), "the longest-idle connection made room"
            for _, writer in idle:
                writer.close()
    finally:
        server.process.send_signal(signal.SIGTERM)
        _, err = server.process.communicate(timeout=GUARD)
    warnings = [line for line in err.splitlines() if "connection limit 64 reached" in line]
    assert len(warnings) == 1, err


def _low_descriptor_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


async def test_idle_connections_past_the_descriptor_limit_lock_no_one_out() -> None:
    """With 256 descriptors and no --max-connections, 300 idle connections still leave /health answering."""
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1024:
        pytest.skip("the test itself needs 300 descriptors")
    server = serve("--log-level", "error", preexec_fn=_low_descriptor_limit)
    try:
        port = int(server.url.rsplit(":", 1)[1])
        idle = [await _idle_connection(port) for _ in range(300)]
        fresh = await _idle_connection(port)
        for _, writer in [*idle, fresh]:
            writer.close()
    finally:
        server.process.kill()
        server.process.communicate(timeout=GUARD)


async def test_the_request_hooks_see_a_parked_wait_as_busy() -> None:
    """The hooks into aiohttp (its protocol, web.Server.request_handler) still work: a parked get is busy, not idle.

    If aiohttp stops reading the request handler from its server, or wraps
    the protocol differently, this fails: parked waits would then be shed.
    """
    async with BootstrapServer(ServerConfig(port=0, max_connections=8)) as server:
        table = server.connections
        assert table.limit == 8
        async with aiohttp.ClientSession() as session:
            parked = asyncio.create_task(session.get(f"{server.url}/get_transfer_engine_info?rank=1&wait=60"))
            await until(lambda: server.registry.parked == 1)
            assert (table.open, table.idle) == (1, 0)
            idle = [await _idle_connection(server.port) for _ in range(12)]
            assert table.open == 8
            assert table.shed == 12 + 1 - 8
            assert not parked.done()
            assert all([await _closed_by_server(reader) for reader, _ in idle[:5]])
            await server.registry.register(info_key(1), {"session_id": "s", "weights_info_dict": {}})
            assert (await asyncio.wait_for(parked, GUARD)).status == 200
            for _, writer in idle:
                writer.close()


async def test_every_connection_busy_refuses_the_newcomer() -> None:
    """When every connection has a request in flight, a new one is closed and the parked ones stay."""
    async with (
        BootstrapServer(ServerConfig(port=0, max_connections=2)) as server,
        aiohttp.ClientSession() as session,
    ):
        parked = [
            asyncio.create_task(session.get(f"{server.url}/get_transfer_engine_info?rank={r}&wait=60"))
            for r in (1, 2)
        ]
        await until(lambda: server.registry.parked == 2)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert await _closed_by_server(reader)
        writer.close()
        assert server.registry.parked == 2
        for rank in (1, 2):
            await server.registry.register(info_key(rank), {"session_id": "s", "weights_info_dict": {}})
        assert [(await asyncio.wait_for(task, GUARD)).status for task in parked] == [200, 200]


def test_max_connections_option_reaches_the_config() -> None:
    """--max-connections N sets the cap; without it the server derives one from the open file limit."""
    assert server_config(server_parser().parse_args(["--max-connections", "64"]), {}).max_connections == 64
    assert server_config(server_parser().parse_args([]), {}).max_connections is None
    with pytest.raises(ValueError, match="max connections must be at least 1"):
        ServerConfig(max_connections=0)


def test_the_derived_cap_leaves_descriptors_free() -> None:
    """The default cap is the open file limit less 128 (half of a tiny limit)."""
    from aiobootstrap.server.open_files import connection_limit

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    expected = None if soft == resource.RLIM_INFINITY else max(1, soft // 2, soft - 128)
    assert connection_limit(None) == expected


async def test_a_cap_above_the_open_file_limit_is_kept_with_a_warning(caplog) -> None:
    """--max-connections beyond what the open file limit leaves room for is honoured, and warned about."""
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        async with BootstrapServer(ServerConfig(port=0, max_connections=1 << 40)) as server:
            assert server.connections.limit == 1 << 40
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] != resource.RLIM_INFINITY:
        assert "open file limit" in caplog.text
