"""Where the server bends aiohttp: every hook on API that aiohttp does not promise, in one room.

The rest of the server uses aiohttp as its documentation says. What cannot
be done that way is done here, one function or class per hook, each saying
which aiohttp names it relies on and why the server needs it (as aiojobs
bends aiohttp in its one ``aiohttp.py``). ``tests/test_aiohttp_internals.py``
checks every hook against the installed aiohttp and fails naming the release
and the name when one changes; ``pyproject.toml`` bounds aiohttp at the
newest minor release that test passed on. Before raising that bound, run it.

One more thing the server takes for granted is checked there too, though
nothing here wraps it: the protocol ``web.Server()`` makes for a connection
(``web.RequestHandler``) is a plain ``asyncio.Protocol``, whose callbacks the
connection table's ``_Tracked`` forwards one by one.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from .._names import host_port
from ..wire.errors import error_body
from ..wire.routes import JSON_TYPE

if TYPE_CHECKING:
    # The return type aiohttp declares for get_info (a TypedDict, every key optional): a custom
    # resource or route must return it to type-check, and aiohttp exports it under no public name.
    # For annotations only, so the server still starts on an aiohttp without it: import it
    # under TYPE_CHECKING too.
    from aiohttp.web_urldispatcher import _InfoDict as InfoDict

__all__ = [
    "Handle",
    "InfoDict",
    "ProtocolSite",
    "count_written",
    "reply_begun",
    "send_continue",
    "short_parse_errors",
    "wrap_request_handler",
]

Handle = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
"""What ``web.Server`` calls with each request: the app's whole handling of it."""


class ProtocolSite(web.BaseSite):
    """A listening socket served through a protocol factory of ours rather than the runner's ``web.Server``.

    aiohttp's sites serve ``runner.server`` itself; the connection table
    (``server/connections.py``) needs each connection's protocol wrapped, so
    the server needs a site of its own. Relies on two things of
    ``web.BaseSite``: its ``start()`` registers the site with the runner
    (which then stops it at cleanup), and ``BaseSite._server``, private, holds
    the ``asyncio.Server`` that ``BaseSite.stop()`` closes and
    ``BaseRunner.addresses`` reads. ``SockSite.start`` sets it the same way.
    """

    __slots__ = ("_factory", "_listen_backlog", "_name", "_sock", "_tls")

    def __init__(
        self,
        runner: web.BaseRunner,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        *,
        ssl_context: ssl.SSLContext | None,
        backlog: int,
    ) -> None:
        super().__init__(runner)
        self._sock = sock
        self._factory = factory
        self._tls = ssl_context
        self._listen_backlog = backlog
        host, port = sock.getsockname()[:2]
        self._name = f"{'https' if ssl_context else 'http'}://{host_port(host, port)}"

    @property
    def name(self) -> str:
        return self._name

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._factory, sock=self._sock, ssl=self._tls, backlog=self._listen_backlog
        )


def wrap_request_handler(server: web.Server, wrap: Callable[[Handle], Handle]) -> None:
    """Make ``server`` call ``wrap(handler)`` for every request instead of its handler.

    Relies on ``web.Server.request_handler``: an attribute with no
    underscore but no promise either, which each new connection's
    ``RequestHandler`` copies when it is made. So this must run before any
    connection opens. The connection table needs it to see every request
    on its connection from the moment aiohttp hands it over (the ``Expect``
    handler and the app's middlewares included), and the app itself
    (``create_app``) knows nothing of sockets.
    """
    handle = server.request_handler
    if not callable(handle):  # pragma: no cover - aiohttp moved the hook: see tests/test_aiohttp_internals.py
        raise RuntimeError("aiohttp's web.Server has no request_handler to wrap")
    server.request_handler = wrap(handle)


class _ShortParseErrors(web.RequestHandler):
    """aiohttp's protocol, its reply to a request it could not parse one JSON line (see :func:`short_parse_errors`)."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status == 500 or message is None:
            return super().handle_error(request, status, exc, message)
        # aiohttp's message quotes the bad line, with a caret line under it: 16 KiB for an 8 KiB line.
        detail = message.split("\n", 1)[0].strip().rstrip(":.") or "Bad request"
        super().handle_error(request, status, exc, detail)  # its logging, and its check that nothing was sent
        reply = web.Response(status=status, body=error_body(f"{detail}."), content_type=JSON_TYPE)
        reply.force_close()
        return reply


def short_parse_errors(handler: web.RequestHandler) -> None:
    """Make ``handler`` answer a request aiohttp could not parse with one JSON line, as every other ``4xx``.

    aiohttp answers such a request itself, in plain text quoting the request
    line it could not read (its reply is twice that line), from
    ``RequestHandler.handle_error``, which the app's handlers and middlewares
    never see. Relies on that method (its signature and its being called for
    a parse error) and on ``web.Server()`` making a plain ``RequestHandler``,
    whose class a subclass without slots of its own can take.
    """
    handler.__class__ = _ShortParseErrors


def count_written(request: web.BaseRequest, size: int) -> None:
    """Count ``size`` bytes written straight to the request's transport as sent for it.

    Relies on ``AbstractStreamWriter.output_size``: the bytes aiohttp has
    sent for a request, which its request handler reads before an error
    reply (none once something was sent: the connection is closed instead).
    Pre-built replies (``server/fastpath/``) bypass the writer, so they
    count themselves here; :func:`reply_begun` then sees them too.
    """
    request.writer.output_size += size


def reply_begun(request: web.BaseRequest) -> bool:
    """Whether any of the request's reply has been written (by aiohttp or :func:`count_written`)."""
    return request.writer.output_size > 0


async def send_continue(request: web.BaseRequest) -> None:
    """Send ``100 Continue``, then forget its bytes: the interim reply is not the response.

    What aiohttp's own (private) ``_default_expect_handler`` does: write it
    with ``request.writer`` and set ``output_size`` back to 0, so that the
    request's reply is still sent (an error reply included) and its length
    is the reply's alone.
    """
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0
