"""Limits: body size, parked waiters, distinct ranks, request line and header sizes, slow clients."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator

import pytest

from aiobootstrap import (
    BootstrapClient,
    BootstrapServer,
    ServerConfig,
    TooManyRanks,
    create_app,
)
from aiobootstrap.server import open_files
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.server.config import DEFAULT_MAX_WAITERS
from aiobootstrap.store import MemoryStore, StoreLimits
from aiobootstrap.wire.routes import BATCH_QUERY_CHARS

from .helpers.registry import open_registry, register_in, stored, stored_count
from .helpers.waits import GUARD, until

PATH = "/register_transfer_engine_info"


def _body(rank: int, weights: dict[str, object] | None = None) -> dict[str, object]:
    return {"rank": rank, "transfer_engine_info": {"session_id": "s", "weights_info_dict": weights or {}}}


async def _raw(port: int, data: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    return reader, writer


async def _head(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)


# -- body size ----------------------------------------------------------


@pytest.fixture
async def small(aiohttp_client):
    return await aiohttp_client(create_app(ServerConfig(max_body_size=1024, body_timeout=0.2)))


async def test_body_over_the_limit_with_content_length_is_413(small):
    """A body announced by Content-Length over --max-body-size is a 413 naming the limit."""
    response = await small.put(PATH, json=_body(0, {"pad": "x" * 2000}))
    assert response.status == 413
    assert "limit of 1024 bytes" in (await response.json())["detail"]
    assert await stored_count(small.app[REGISTRY]) == 0


async def test_chunked_body_over_the_limit_is_413(small):
    """A chunked body (no Content-Length) is cut off at the limit with the same 413."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"rank": 0, "transfer_engine_info": {"session_id": "'
        for _ in range(10):
            yield b"x" * 200
        yield b'", "weights_info_dict": {}}}'

    response = await small.put(PATH, data=chunks())
    assert response.request_info.headers.get("Transfer-Encoding") == "chunked"
    assert response.status == 413
    assert "limit of 1024 bytes" in (await response.json())["detail"]


async def test_an_oversized_content_length_is_refused_before_the_body_arrives(small):
    """A Content-Length over the limit is answered at once, without waiting for the body."""
    reader, writer = await _raw(
        small.port, f"PUT {PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {1 << 30}\r\n\r\n".encode()
    )
    assert (await _head(reader)).startswith(b"HTTP/1.1 413")
    writer.close()


async def test_a_body_that_stops_arriving_is_408(small):
    """A body slower than --body-timeout is a 408 JSON reply, and nothing is stored."""
    reader, writer = await _raw(
        small.port, f"PUT {PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{{".encode()
    )
    head = await _head(reader)
    assert head.startswith(b"HTTP/1.1 408")
    assert b"application/json" in head
    # The rest of that body may still come: it must never be read as a new request.
    assert b"Connection: close" in head
    writer.close()
    assert await stored_count(small.app[REGISTRY]) == 0


# -- waiters ------------------------------------------------------------


async def test_waiters_over_the_limit_get_503_and_the_parked_ones_are_unaffected(aiohttp_client):
    """Past --max-waiters a wait is a 503 with Retry-After; the waits already parked still get answered."""
    client = await aiohttp_client(
        create_app(ServerConfig(max_waiters=2)), server_kwargs={"handler_cancellation": True}
    )
    registry = client.app[REGISTRY]
    parked = [
        asyncio.create_task(client.get(f"/get_transfer_engine_info?rank={rank}&wait=30")) for rank in (0, 1)
    ]
    await until(lambda: registry.parked == 2)
    refused = await client.get("/get_transfer_engine_info?rank=2&wait=30")
    assert refused.status == 503
    assert float(refused.headers["Retry-After"]) > 0
    assert "limit" in (await refused.json())["detail"]
    batch = await client.get("/get_transfer_engine_info_batch?ranks=5-6&wait=30")
    assert batch.status == 503
    instant = await client.get("/get_transfer_engine_info?rank=2")
    assert instant.status == 404, "a get that does not wait is never refused"
    for rank in (0, 1):
        assert (await client.put(PATH, json=_body(rank))).status == 200
    assert [(await task).status for task in parked] == [200, 200]


def test_default_waiter_limit_fits_the_open_file_limit(monkeypatch):
    """The CLI's default waiter limit leaves 1024 open files for everything else."""
    monkeypatch.setattr(open_files, "open_file_limit", lambda: 4096)
    assert open_files.waiter_limit(None, DEFAULT_MAX_WAITERS) == 4096 - 1024
    monkeypatch.setattr(open_files, "open_file_limit", lambda: 1 << 20)
    assert open_files.waiter_limit(None, DEFAULT_MAX_WAITERS) == DEFAULT_MAX_WAITERS
    monkeypatch.setattr(open_files, "open_file_limit", lambda: None)
    assert open_files.waiter_limit(None, DEFAULT_MAX_WAITERS) == DEFAULT_MAX_WAITERS


def test_an_explicit_waiter_limit_is_kept_with_a_warning(monkeypatch, caplog):
    """--max-waiters above what the open file limit allows is honoured, and warned about."""
    monkeypatch.setattr(open_files, "open_file_limit", lambda: 4096)
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        assert open_files.waiter_limit(10_000, DEFAULT_MAX_WAITERS) == 10_000
    assert "open file limit" in caplog.text


# -- distinct ranks -----------------------------------------------------


async def test_distinct_ranks_over_the_limit_are_409(aiohttp_client):
    """Without a world size, a new rank past --max-ranks is a 409; known ranks may re-register."""
    client = await aiohttp_client(create_app(ServerConfig(max_ranks=2)))
    for rank in (0, 1):
        assert (await client.put(PATH, json=_body(rank))).status == 200
    refused = await client.put(PATH, json=_body(2))
    assert refused.status == 409
    assert "limit" in (await refused.json())["detail"]
    assert await stored(client.app[REGISTRY], 2) is None
    assert await client.app[REGISTRY].store.version("default") == 2
    assert (await client.put(PATH, json=_body(1))).status == 200
    assert (await client.delete(f"{PATH}?rank=1")).status == 200
    assert (await client.put(PATH, json=_body(2))).status == 200


async def test_a_world_size_replaces_the_rank_limit(aiohttp_client):
    """With --world-size the world bounds the ranks and --max-ranks does not apply."""
    client = await aiohttp_client(create_app(ServerConfig(max_ranks=1, world_size=3)))
    assert [(await client.put(PATH, json=_body(rank))).status for rank in range(3)] == [200, 200, 200]


async def test_client_raises_too_many_ranks_at_once():
    """The client raises TooManyRanks straight away, without retrying for its timeout."""
    async with BootstrapServer(port=0, max_ranks=1) as server, BootstrapClient(server.url) as client:
        await client.register(0, session_id="s", weights_info_dict={})
        with pytest.raises(TooManyRanks, match="limit"):
            await client.register(1, session_id="s", weights_info_dict={}, timeout=None)


# -- request line and headers -------------------------------------------


async def test_the_longest_batch_query_fits_the_smallest_request_line():
    """The client's batch queries fit even the smallest --max-request-line the config accepts."""
    config = ServerConfig(port=0, max_request_line=BATCH_QUERY_CHARS + 512)
    async with BootstrapServer(config) as server:
        ranks = range(0, 6000, 2)  # "0,2,4,...": about 13,000 characters, several batches
        for rank in ranks:
            await register_in(server.registry, rank, "s", {})
        async with BootstrapClient(server.url) as client:
            infos = await client.get_many(ranks, timeout=GUARD)
        assert sorted(infos) == list(ranks)


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /get_transfer_engine_info?rank=" + b"1" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 3000 + b"\r\n\r\n",
    ],
    ids=["request-line", "header"],
)
async def test_oversized_request_line_or_header_is_400_and_logged_in_one_line(request_bytes, caplog):
    """aiohttp refuses them itself with a 400; the log says so in one line, without a traceback."""
    config = ServerConfig(port=0, max_request_line=4608, max_header_size=2048)
    async with BootstrapServer(config) as server:
        with caplog.at_level(logging.WARNING, logger="aiobootstrap.http"):
            reader, writer = await _raw(server.port, request_bytes)
            head = await _head(reader)
            writer.close()
        assert head.split(b"\r\n")[0].split(b" ")[1] == b"400"
        records = [r for r in caplog.records if r.name == "aiobootstrap.http"]
        assert records
        assert all(r.exc_info is None and r.levelno == logging.WARNING for r in records)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_ranks", 0),
        ("max_request_line", 1000),
        ("max_header_size", 100),
        ("idle_timeout", 0),
        ("body_timeout", float("nan")),
    ],
)
def test_config_refuses_unworkable_limits(field, value):
    """Limits that would break the client or never let a request through are refused at once."""
    with pytest.raises(ValueError, match=field.replace("_", " ")):
        ServerConfig(**{field: value})


# -- slow and stuck clients ---------------------------------------------


@pytest.fixture
async def server() -> AsyncIterator[BootstrapServer]:
    async with BootstrapServer(port=0, idle_timeout=0.3) as server:
        yield server


async def _served(server: BootstrapServer, rank: int) -> None:
    async with BootstrapClient(server.url) as client:
        await client.register(rank, session_id=f"s{rank}", weights_info_dict={})
        assert (await client.get(rank, timeout=GUARD)).session_id == f"s{rank}"


@pytest.mark.parametrize(
    "opening",
    [b"", b"GET /health HTTP/1.1\r\nHost:"],
    ids=["never-sends", "slow-headers"],
)
async def test_a_silent_connection_blocks_no_one_and_is_closed_after_the_idle_timeout(server, opening):
    """A client that sends nothing (or half a head) does not hold up others; --idle-timeout closes it."""
    silent = [await _raw(server.port, opening) for _ in range(20)]
    await _served(server, 0)
    for reader, writer in silent:
        assert await asyncio.wait_for(reader.read(), GUARD) == b""
        writer.close()


async def test_a_client_that_never_reads_its_replies_blocks_no_one(server):
    """Pipelined gets of a large info that are never read stall only their own connection."""
    await register_in(server.registry, 7, "big", {"blob": "x" * (4 << 20)})
    request = b"GET /get_transfer_engine_info?rank=7 HTTP/1.1\r\nHost: x\r\n\r\n"
    stuck = [await _raw(server.port, request * 8) for _ in range(4)]
    await _served(server, 1)
    for _, writer in stuck:
        writer.close()


async def test_a_server_with_a_stuck_reader_still_stops():
    """Closing the server does not wait for ever on a client that never reads."""
    server = BootstrapServer(port=0, shutdown_timeout=0.2)
    await server.start()
    await register_in(server.registry, 7, "big", {"blob": "x" * (4 << 20)})
    _, writer = await _raw(
        server.port, b"GET /get_transfer_engine_info?rank=7 HTTP/1.1\r\nHost: x\r\n\r\n" * 8
    )
    await asyncio.wait_for(server.close(), GUARD)
    writer.close()


async def test_a_long_poll_outlives_the_idle_timeout(server):
    """--idle-timeout closes idle connections only: a parked wait longer than it gets its 404."""
    reader, writer = await _raw(
        server.port, b"GET /get_transfer_engine_info?rank=9&wait=1 HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    assert (await _head(reader)).startswith(b"HTTP/1.1 404")
    writer.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-ranks", "-1"], "max ranks must be at least 1"),
        (["--max-request-line", "100"], "max request line must be at least"),
        (["--max-header-size", "10"], "max header size must be at least"),
        (["--idle-timeout", "0"], "idle timeout must be a positive number"),
        (["--body-timeout", "inf"], "body timeout must be a positive number"),
        (["--tls-cert", "cert.pem"], "--tls-cert and --tls-key"),
        (["--max-waiters", "-1"], "max waiters must be non-negative"),
    ],
)
async def test_cli_refuses_unworkable_limits_in_one_line(args, message):
    """A bad limit on the command line: one line on stderr, exit status 2."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiobootstrap", "--port", "0", *args, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), GUARD)
    assert proc.returncode == 2
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1
    assert message in lines[0]


async def test_registry_refuses_a_new_rank_past_max_ranks():
    """The registry itself (no HTTP) enforces max_ranks, and a refusal uses up no version."""
    registry = await open_registry(MemoryStore(StoreLimits(max_ranks=1)))
    await register_in(registry, 0, "s", {})
    with pytest.raises(TooManyRanks):
        await register_in(registry, 1, "s", {})
    assert await registry.store.version("default") == 1
    await register_in(registry, 0, "again", {})
    assert await registry.store.version("default") == 2


def test_max_ranks_zero_switches_the_cap_off():
    """--max-ranks 0 means no cap on distinct ranks, for a large deployment run without --world-size."""
    from aiobootstrap.cli.parser import server_config, server_parser

    assert server_config(server_parser().parse_args(["--max-ranks", "0"]), {}).max_ranks is None
    assert server_config(server_parser().parse_args([]), {}).max_ranks == 65_536
