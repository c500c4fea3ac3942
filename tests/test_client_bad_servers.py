"""The client against servers that misbehave: every call ends by its timeout plus one round trip,
and a reply past the bound is refused unread.

Each server here is the test's own (``asyncio.start_server`` on a free port): it
reads a request head, then holds it, drips, streams for ever or announces a
gigabyte. Each call is guarded by its timeout, one round trip and a generous
margin, so a client that overstays fails the test in seconds, not minutes.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable
from types import TracebackType

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from aiobootstrap import BootstrapClient, ServerUnavailable, UnexpectedReply
from aiobootstrap.client.retry import ROUND_TRIP
from aiobootstrap.wire.routes import GET_PATH, HEALTH_PATH

from .helpers.waits import GUARD

ServerFactory = Callable[..., Awaitable[TestServer]]
Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

TIMEOUT = 0.2
MARGIN = 3.0
"""Generous: the bound tested is the timeout plus one round trip; this only keeps a loaded machine from flaking."""
BOUND = TIMEOUT + ROUND_TRIP + MARGIN

_CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


class BadServer:
    """A server that reads each request's head, then does ``behave``; ``hung_up`` is set when a
    client closed a connection while the server was still at it."""

    def __init__(self, behave: Behaviour) -> None:
        self._behave = behave
        self.hung_up = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self.url = ""

    async def __aenter__(self) -> BadServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await reader.readuntil(b"\r\n\r\n")
            await self._behave(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.hung_up.set()
        finally:
            writer.close()


async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Hold the request until the client hangs up."""
    while await reader.read(65536):
        pass
    raise ConnectionResetError


async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A head, then one byte of body at a time, each well inside any read timeout."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
    while True:
        writer.write(b" ")
        await writer.drain()
        await asyncio.sleep(0.2)


async def endless_chunks(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A chunked body that never ends, a kilobyte every few milliseconds."""
    writer.write(_CHUNKED_HEAD)
    while True:
        writer.write(b"400\r\n" + b" " * 1024 + b"\r\n")
        await writer.drain()
        await asyncio.sleep(0.005)


async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A chunked body that never ends, as fast as the client takes it."""
    writer.write(_CHUNKED_HEAD)
    chunk = b"10000\r\n" + b" " * 65536 + b"\r\n"
    while True:
        writer.write(chunk)
        await writer.drain()


async def a_gigabyte(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A head announcing a 1 GiB body, then the body, slowly."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n")
    while True:
        writer.write(b" " * 65536)
        await writer.drain()
        await asyncio.sleep(0.05)


async def bound(call: Awaitable[object], seconds: float = BOUND) -> None:
    """``call`` must end (here: raise) within ``seconds``."""
    await asyncio.wait_for(call, seconds)


@pytest.mark.parametrize("behave", [never_answer, drip, endless_chunks], ids=["silent", "drip", "endless"])
async def test_get_ends_by_its_timeout_whatever_the_server_does(behave: Behaviour) -> None:
    """get(timeout=0.2) raises ServerUnavailable by its timeout plus one round trip: a server that
    holds the request, drips its reply or streams one for ever cannot hold the call."""
    async with BadServer(behave) as server, BootstrapClient(server.url) as client:
        with pytest.raises(ServerUnavailable, match="did not answer within the call's timeout"):
            await bound(client.get(3, timeout=TIMEOUT))


@pytest.mark.parametrize("behave", [never_answer, drip], ids=["silent", "drip"])
async def test_register_ends_by_its_timeout_whatever_the_server_does(behave: Behaviour) -> None:
    """register(timeout=0.2) is bounded the same way: no fixed 60 s read timeout of its own."""
    async with BadServer(behave) as server, BootstrapClient(server.url) as client:
        with pytest.raises(ServerUnavailable):
            await bound(client.register(3, session_id="s", weights_info_dict={}, timeout=TIMEOUT))


async def test_get_many_and_an_ask_once_get_end_by_their_timeout() -> None:
    """A batch get, and a get with timeout=0 (ask once), end by their timeout plus one round trip."""
    async with BadServer(never_answer) as server, BootstrapClient(server.url) as client:
        with pytest.raises(ServerUnavailable):
            await bound(client.get_many(range(4), timeout=TIMEOUT))
        with pytest.raises(ServerUnavailable):
            await bound(client.get(3, timeout=0), ROUND_TRIP + MARGIN)


async def test_a_gigabyte_announced_is_refused_before_its_body() -> None:
    """A Content-Length past the bound is an UnexpectedReply at once, not a read of 1 GiB."""
    async with BadServer(a_gigabyte) as server, BootstrapClient(server.url) as client:
        with pytest.raises(UnexpectedReply, match="larger than the client's bound") as caught:
            await bound(client.get(3, timeout=GUARD), MARGIN)
        assert caught.value.status == 200
        await asyncio.wait_for(server.hung_up.wait(), GUARD)


async def test_an_endless_reply_is_read_no_further_than_the_bound() -> None:
    """A chunked reply with no end is refused once it passes max_reply_size, and its connection
    dropped (the server sees the client hang up)."""
    async with BadServer(flood) as server, BootstrapClient(server.url, max_reply_size=1 << 20) as client:
        with pytest.raises(UnexpectedReply, match="larger than the client's bound"):
            await bound(client.get(3, timeout=GUARD), MARGIN)
        await asyncio.wait_for(server.hung_up.wait(), GUARD)


async def test_a_compressed_reply_is_bounded_as_it_is_decoded(aiohttp_server: ServerFactory) -> None:
    """A small gzip body that inflates past the bound is refused: the bound is on what is read."""
    bomb = gzip.compress(b" " * (8 << 20))

    async def answer(request: web.Request) -> web.Response:
        return web.Response(
            body=bomb, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        )

    app = web.Application()
    app.router.add_get(GET_PATH, answer)
    server = await aiohttp_server(app)
    async with BootstrapClient(f"http://127.0.0.1:{server.port}", max_reply_size=1 << 20) as client:
        with pytest.raises(UnexpectedReply, match="larger than the client's bound"):
            await bound(client.get(3, timeout=GUARD), GUARD)


async def test_the_bound_is_per_rank_asked(aiohttp_server: ServerFactory) -> None:
    """max_reply_size bounds each rank's share: a batch of two may hold twice what one get may."""
    from aiobootstrap import ServerConfig, create_app

    server = await aiohttp_server(create_app(ServerConfig()))
    weights = {"w": "x" * 3000}
    url = f"http://127.0.0.1:{server.port}"
    async with BootstrapClient(url) as client:
        for rank in (0, 1):
            await client.register(rank, session_id="s", weights_info_dict=weights)
    async with BootstrapClient(url, max_reply_size=3000) as client:
        assert (await client.get(0)).weights_info_dict == weights
        assert sorted(await client.get_many([0, 1])) == [0, 1]
    async with BootstrapClient(url, max_reply_size=1000) as client:
        with pytest.raises(UnexpectedReply, match=r"bound of 2024 bytes \(max_reply_size"):
            await client.get(0)
        with pytest.raises(UnexpectedReply):
            await client.get_many([0, 1])


def test_a_bound_below_one_byte_is_refused() -> None:
    """max_reply_size must be a positive number of bytes, or None for no bound."""
    with pytest.raises(ValueError, match="max_reply_size"):
        BootstrapClient("http://127.0.0.1:1", max_reply_size=0)
    BootstrapClient("http://127.0.0.1:1", max_reply_size=None)


async def test_a_wait_asked_again_after_a_503_asks_only_what_is_left(aiohttp_server: ServerFactory) -> None:
    """A long-poll that a restarting server answers 503 (after holding it) is asked again for
    what is left of the caller's timeout, not the wait it first asked: the server honours the
    wait, so asking the first wait again would hold the call a whole round trip past its timeout
    (a get(timeout=4) across a restart raised ServerUnavailable at 5.00 s)."""
    from aiobootstrap import RankNotRegistered

    held = 0.5
    waits: list[float] = []

    async def answer(request: web.Request) -> web.Response:
        waits.append(float(request.query["wait"]))
        if len(waits) == 1:
            await asyncio.sleep(held)
            return web.json_response({"detail": "The server is shutting down."}, status=503)
        await asyncio.sleep(waits[-1])  # a server honouring the wait it was asked
        return web.json_response({"detail": "No transfer engine info for rank 3", "missing": [3]}, status=404)

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="OK")

    app = web.Application()
    app.router.add_get(GET_PATH, answer)
    app.router.add_get(HEALTH_PATH, health)
    server = await aiohttp_server(app)
    async with BootstrapClient(f"http://127.0.0.1:{server.port}") as client:
        with pytest.raises(RankNotRegistered):
            await bound(client.get(3, timeout=2.0), 2.0 + ROUND_TRIP + MARGIN)
    assert len(waits) >= 2
    assert waits[1] <= waits[0] - held
