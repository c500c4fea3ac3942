"""Request bodies: one memory budget for all bodies in flight, and a connection closed (not drained) after a refusal."""

from __future__ import annotations

import asyncio

import pytest

from aiobootstrap import BootstrapServer, ServerConfig, create_app
from aiobootstrap.cli.parser import server_config, server_parser
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.server.body import BODY_BUDGET

from .helpers.registry import stored
from .helpers.waits import GUARD, until

PATH = "/register_transfer_engine_info"
BODY = b'{"rank": %d, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {"pad": "%s"}}}'


def _body(rank: int, size: int) -> bytes:
    """A registration of exactly ``size`` bytes."""
    bare = BODY % (rank, b"")
    return BODY % (rank, b"x" * (size - len(bare)))


async def _send_head(
    port: int, length: int | None, first: bytes = b""
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    writer.write(f"PUT {PATH} HTTP/1.1\r\nHost: x\r\n{framing}\r\n\r\n".encode() + first)
    await writer.drain()
    return reader, writer


async def _reply(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return head, await asyncio.wait_for(reader.readexactly(length), GUARD)


async def _closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), GUARD) == b""
    except ConnectionResetError:
        return True


@pytest.fixture
async def server():
    config = ServerConfig(port=0, max_body_size=1000, max_body_memory=2000, body_timeout=60)
    async with BootstrapServer(config) as server:
        yield server


async def test_bodies_past_the_memory_budget_get_503_before_they_are_read(server) -> None:
    """Two stalled 1,000-byte uploads fill a 2,000-byte budget: a third gets 503, Retry-After, and is closed."""
    budget = server.app[BODY_BUDGET]
    stalled = [await _send_head(server.port, 1000, b"{") for _ in range(2)]
    await until(lambda: budget.used == 2000)
    reader, writer = await _send_head(server.port, 1000)
    head, body = await _reply(reader)
    assert head.startswith(b"HTTP/1.1 503")
    assert b"Retry-After: 1" in head
    assert b"Connection: close" in head
    assert b"retry shortly" in body
    assert await _closed(reader)
    writer.close()
    # A stalled upload that completes is stored and gives its share back.
    stalled_reader, stalled_writer = stalled[0]
    stalled_writer.write(_body(4, 1000)[1:])
    head, _ = await _reply(stalled_reader)
    assert head.startswith(b"HTTP/1.1 200")
    assert budget.used == 1000
    assert await stored(server.registry, 4) is not None
    for _, writer in stalled:
        writer.close()
    await until(lambda: budget.used == 0)


async def test_a_chunked_body_is_charged_as_it_arrives() -> None:
    """A chunked body that would overrun the budget is refused with 503 midway, and its connection closed."""
    config = ServerConfig(port=0, max_body_size=1000, max_body_memory=1500)
    async with BootstrapServer(config) as server:
        budget = server.app[BODY_BUDGET]
        stalled = await _send_head(server.port, 1000, b"{")
        await until(lambda: budget.used == 1000)
        reader, writer = await _send_head(server.port, None, b"190\r\n" + b"x" * 400 + b"\r\n")
        await until(lambda: budget.used == 1400)
        writer.write(b"c8\r\n" + b"x" * 200 + b"\r\n")
        head, _ = await _reply(reader)
        assert head.startswith(b"HTTP/1.1 503")
        assert await _closed(reader)
        writer.close()
        stalled[1].close()
        await until(lambda: budget.used == 0)


async def test_a_413_closes_the_connection_without_reading_the_body(server) -> None:
    """A body announced over --max-body-size: 413, then the connection is closed; nothing waits for the body."""
    reader, writer = await _send_head(server.port, 1 << 30)
    head, _ = await _reply(reader)
    assert head.startswith(b"HTTP/1.1 413")
    assert await _closed(reader), "closed while the client still owes the body"
    writer.close()


async def test_a_408_closes_the_connection_without_draining_the_body() -> None:
    """A body slower than --body-timeout: 408, then the connection is closed at once."""
    async with BootstrapServer(ServerConfig(port=0, body_timeout=0.05)) as server:
        reader, writer = await _send_head(server.port, 1 << 20, b"{")
        head, _ = await _reply(reader)
        assert head.startswith(b"HTTP/1.1 408")
        assert await _closed(reader)
        writer.close()
        assert await stored(server.registry, 0) is None


async def test_the_budget_holds_in_the_app_alone(aiohttp_client) -> None:
    """create_app(config) carries the budget: an in-process app enforces it too, and frees it after each body."""
    client = await aiohttp_client(create_app(ServerConfig(max_body_size=1000, max_body_memory=1000)))
    for rank in range(3):
        assert (await client.put(PATH, data=_body(rank, 1000))).status == 200
    assert client.app[BODY_BUDGET].used == 0
    assert await stored(client.app[REGISTRY], 2) is not None


def test_max_body_memory_option_and_its_floor() -> None:
    """--max-body-memory reaches the config; a budget below the body limit is refused."""
    assert (
        server_config(server_parser().parse_args(["--max-body-memory", "100000000"]), {}).max_body_memory
        == 100_000_000
    )
    with pytest.raises(ValueError, match="max body memory"):
        ServerConfig(max_body_size=1000, max_body_memory=999)


async def _chunked(port: int, codings: str, body: bytes) -> tuple[bytes, bytes]:
    """A register of ``body`` in one chunk under ``Transfer-Encoding: codings``; the reply's head and body.

    The reply is read to the connection's end when it says ``Connection: close``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"PUT {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Transfer-Encoding: {codings}\r\n\r\n".encode()
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    )
    await writer.drain()
    try:
        return await _reply(reader)
    finally:
        writer.close()


@pytest.mark.parametrize("codings", ["gzip, chunked", "deflate,chunked", "x-custom, chunked"])
async def test_a_transfer_coding_beside_chunked_is_400_before_the_body(server, codings: str) -> None:
    """Transfer-Encoding: gzip, chunked is refused (a JSON 400, as aiohttp refuses a lone gzip), not read as chunked."""
    head, payload = await _chunked(server.port, codings, _body(7, 200))
    assert head.startswith(b"HTTP/1.1 400")
    assert b"Transfer-Encoding" in payload
    # The body was left unread: the connection cannot carry another request (it stayed open before).
    assert b"Connection: close" in head
    assert await stored(server.registry, 7) is None


@pytest.mark.parametrize("codings", ["chunked", "identity, chunked"])
async def test_chunked_alone_is_still_read(server, codings: str) -> None:
    """chunked (and the no-op identity before it) frames a body as before."""
    head, _ = await _chunked(server.port, codings, _body(8, 200))
    assert head.startswith(b"HTTP/1.1 200")
    assert await stored(server.registry, 8) is not None
