"""The contract with aiohttp that ``aiobootstrap/server/aiohttp_internals.py`` relies on.

Each test drives plain aiohttp through one hook of that module, without the
app, so that a failure is aiohttp's change, and says which release changed
which name. When one fails after an upgrade, adapt the hook, then raise the
bound on aiohttp in ``pyproject.toml``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web, web_urldispatcher

from aiobootstrap.server.aiohttp_internals import (
    Handle,
    ProtocolSite,
    count_written,
    reply_begun,
    send_continue,
    short_parse_errors,
    wrap_request_handler,
)

from .helpers.waits import GUARD

GET = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def _changed(name: str, how: str) -> str:
    return (
        f"aiohttp {aiohttp.__version__} changed {name}: {how}. "
        "aiobootstrap/server/aiohttp_internals.py relies on it: adapt it there, "
        "then raise the bound on aiohttp in pyproject.toml."
    )


async def _ok(request: web.BaseRequest) -> web.StreamResponse:
    return web.Response(text="ok")


async def _exchange(port: int, data: bytes) -> bytes:
    """Send ``data`` on a new connection; everything the server sends until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        return await asyncio.wait_for(reader.read(), GUARD)
    finally:
        writer.close()


class _Served:
    """A low-level ``web.Server`` served through a :class:`ProtocolSite`, noting each protocol it makes."""

    def __init__(self, handler: Handle) -> None:
        self.server = web.Server(handler)
        self.runner = web.ServerRunner(self.server)
        self.made: list[asyncio.Protocol] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]

    def protocol(self) -> asyncio.Protocol:
        made = self.server()
        self.made.append(made)
        return made

    async def start(self) -> ProtocolSite:
        await self.runner.setup()
        site = ProtocolSite(self.runner, self.sock, self.protocol, ssl_context=None, backlog=8)
        await site.start()
        return site


@pytest.fixture
async def served() -> AsyncIterator[_Served]:
    served = _Served(_ok)
    try:
        yield served
    finally:
        await served.runner.cleanup()
        served.sock.close()


async def test_a_protocol_site_serves_its_factory_and_its_runner_knows_it(served: _Served) -> None:
    """BaseSite.start and BaseSite._server: the runner lists the site and its socket, and the factory serves."""
    site = await served.start()
    assert site in served.runner.sites, _changed("BaseSite.start()", "it no longer registers the site")
    assert served.runner.addresses == [served.sock.getsockname()], _changed(
        "BaseSite._server", "BaseRunner.addresses no longer lists the asyncio server a site keeps there"
    )
    reply = await _exchange(served.port, GET)
    assert reply.startswith(b"HTTP/1.1 200 OK"), reply
    assert len(served.made) == 1


async def test_stopping_a_protocol_site_stops_listening(served: _Served) -> None:
    """BaseSite._server: BaseSite.stop() closes the asyncio server a ProtocolSite keeps there."""
    site = await served.start()
    await site.stop()
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", served.port)
    except ConnectionRefusedError:
        return
    writer.close()
    pytest.fail(
        _changed("BaseSite._server", "BaseSite.stop() no longer closes the asyncio server kept there")
    )


async def test_the_wrapped_request_handler_sees_each_request_with_its_protocol(served: _Served) -> None:
    """web.Server.request_handler: a connection made after the swap calls the wrapper, with request.protocol the protocol web.Server() made."""
    seen: list[object] = []

    def wrap(handle: Handle) -> Handle:
        async def wrapped(request: web.BaseRequest) -> web.StreamResponse:
            seen.append(request.protocol)
            return await handle(request)

        return wrapped

    wrap_request_handler(served.server, wrap)
    await served.start()
    reply = await _exchange(served.port, GET)
    assert reply.startswith(b"HTTP/1.1 200 OK"), reply
    assert seen, _changed(
        "web.Server.request_handler", "a new connection no longer calls the handler set there"
    )
    assert seen == served.made, _changed(
        "BaseRequest.protocol", "it is no longer the protocol web.Server() made for the connection"
    )


@pytest.mark.parametrize(
    "request_line",
    [b"GET /" + b"a" * 8000 + b"\x01 HTTP/1.1", b"GARBAGE"],
    ids=["a bad 8 KiB request line", "no request line"],
)
async def test_a_request_aiohttp_cannot_parse_is_one_short_json_line(
    served: _Served, request_line: bytes
) -> None:
    """short_parse_errors: a request aiohttp could not parse is answered a JSON 400 of a few dozen bytes, the
    connection closed (aiohttp's own reply quoted the line, twice its size, in plain text)."""
    made = served.protocol

    def protocol() -> asyncio.Protocol:
        handler = made()
        assert isinstance(handler, web.RequestHandler), _changed(
            "web.Server()", "it no longer makes a RequestHandler"
        )
        short_parse_errors(handler)
        return handler

    served.protocol = protocol  # type: ignore[method-assign]
    await served.start()
    reply = await _exchange(served.port, request_line + b"\r\nHost: x\r\n\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 400 Bad Request\r\n"), _changed(
        "RequestHandler.handle_error", repr(head)
    )
    assert b"Content-Type: application/json" in head
    assert len(body) < 64, body
    assert json.loads(body)["detail"].endswith("."), body


async def test_a_connections_protocol_is_a_plain_asyncio_protocol() -> None:
    """web.RequestHandler: an asyncio.Protocol with the callbacks the connection table forwards, not a BufferedProtocol."""
    protocol = web.Server(_ok)()
    assert isinstance(protocol, asyncio.Protocol), _changed("web.RequestHandler", "it is no asyncio.Protocol")
    assert not isinstance(protocol, asyncio.BufferedProtocol), _changed(
        "web.RequestHandler", "it is a BufferedProtocol, which data_received no longer feeds"
    )
    for name in ("connection_made", "connection_lost", "data_received", "eof_received"):
        method = getattr(type(protocol), name)
        assert method is not getattr(asyncio.Protocol, name), _changed(f"RequestHandler.{name}", "it is gone")


async def test_aiohttp_counts_the_bytes_of_a_reply_it_writes(aiohttp_raw_server: Any) -> None:
    """AbstractStreamWriter.output_size: 0 before a reply, its bytes once aiohttp wrote it (what reply_begun reads)."""
    begun: list[bool] = []

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        begun.append(reply_begun(request))
        response = web.Response(text="ok")
        await response.prepare(request)
        await response.write_eof()
        begun.append(reply_begun(request))
        return response

    server = await aiohttp_raw_server(handler)
    assert (await _exchange(server.port, GET)).startswith(b"HTTP/1.1 200 OK")
    assert begun == [False, True], _changed(
        "AbstractStreamWriter.output_size", "it no longer counts a reply's bytes"
    )


async def test_bytes_counted_as_written_keep_aiohttp_from_appending_an_error_reply(
    aiohttp_raw_server: Any,
) -> None:
    """output_size, as count_written sets it: a handler that fails after writing gets no 500 after its bytes."""
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.write(reply)
        count_written(request, len(reply))
        raise RuntimeError("fails after its reply began")

    server = await aiohttp_raw_server(handler)
    assert await _exchange(server.port, GET) == reply, _changed(
        "AbstractStreamWriter.output_size", "aiohttp no longer reads it before sending an error reply"
    )


async def test_after_send_continue_the_reply_is_still_sent(aiohttp_server: Any) -> None:
    """output_size set back to 0 after 100 Continue, as aiohttp's own Expect handler does: the reply, a 500 too, still goes out."""
    begun: list[bool] = []

    async def expect(request: web.Request) -> None:
        await send_continue(request)
        begun.append(reply_begun(request))

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        raise RuntimeError("fails after reading the body")

    app = web.Application()
    app.router.add_put("/", handler, expect_handler=expect)
    server = await aiohttp_server(app)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        assert (
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD) == b"HTTP/1.1 100 Continue\r\n\r\n"
        )
        writer.write(b"{}")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n"), GUARD)
    except asyncio.IncompleteReadError as exc:
        head = exc.partial
    finally:
        writer.close()
    assert begun == [False], _changed(
        "AbstractStreamWriter.output_size", "setting it to 0 no longer resets the count"
    )
    assert head.startswith(b"HTTP/1.1 500"), _changed(
        "AbstractStreamWriter.output_size", f"the reply after 100 Continue was not sent ({head!r})"
    )


def test_the_info_dict_type_is_what_get_info_declares() -> None:
    """web_urldispatcher._InfoDict: the TypedDict get_info returns, every key optional (so {} is one)."""
    info = getattr(web_urldispatcher, "_InfoDict", None)
    assert info is not None, _changed("web_urldispatcher._InfoDict", "it is gone")
    assert info.__required_keys__ == frozenset(), _changed(
        "_InfoDict", "{} is no longer one: it has required keys"
    )
    for owner in (web.AbstractResource, web.AbstractRoute):
        declared = inspect.get_annotations(owner.get_info, eval_str=True).get("return")
        assert declared is info, _changed(
            f"{owner.__name__}.get_info", f"it returns {declared!r}, not _InfoDict"
        )
