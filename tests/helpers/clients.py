"""A real server for a client under test: pytest-aiohttp's ``aiohttp_server``, which keeps every
request it received, and its URL; or a ``BootstrapServer`` restarted empty on its port."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from aiobootstrap import BootstrapServer, ServerConfig, create_app

ServerFactory = Callable[..., Awaitable[TestServer]]


class Seen:
    """Every request a test server received: (method, path, query, authorization),
    and who sent it: (its X-Caller header, its connection's peer address)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], str | None]] = []
        self.peers: list[tuple[str | None, Any]] = []

    @web.middleware
    async def middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append(
            (request.method, request.path, dict(request.query), request.headers.get("Authorization"))
        )
        assert request.transport is not None
        self.peers.append((request.headers.get("X-Caller"), request.transport.get_extra_info("peername")))
        response: web.StreamResponse = await handler(request)
        return response


async def start(aiohttp_server: ServerFactory, config: ServerConfig | None = None) -> tuple[TestServer, Seen]:
    app = create_app(config or ServerConfig())
    seen = Seen()
    app.middlewares.append(seen.middleware)
    server = await aiohttp_server(app)
    return server, seen


def url_of(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")


async def _restart(server: BootstrapServer) -> BootstrapServer:
    """Stop ``server`` and start an empty one on the same port."""
    port = server.port
    await server.close()
    fresh = BootstrapServer(port=port)
    await fresh.start()
    return fresh
