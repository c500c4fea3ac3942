"""The app served on a free loopback port by aiohttp's runner, as the server serves it; or with one
more ``on_response_prepare`` hook, which turns every pre-built reply back into aiohttp's own."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.core.registry import Registry
from aiobootstrap.server.app import REGISTRY


@dataclass
class Served:
    app: web.Application
    port: int

    @property
    def registry(self) -> Registry:
        return self.app[REGISTRY]


async def _serve(app: web.Application, *, access_log: logging.Logger | None = None) -> AsyncIterator[Served]:
    runner = web.AppRunner(app, handler_cancellation=True, access_log=access_log)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    try:
        yield Served(app, port)
    finally:
        await runner.cleanup()


async def _noop_hook(request: web.Request, response: web.StreamResponse) -> None:
    pass


@pytest.fixture
def served_config() -> ServerConfig:
    """The config ``fast`` and ``plain`` serve (a module overrides it to serve another)."""
    return ServerConfig()


@pytest.fixture
async def fast(served_config: ServerConfig) -> AsyncIterator[Served]:
    """The app as served: replies to gets and watches are pre-built bytes."""
    async for served in _serve(create_app(served_config)):
        yield served


@pytest.fixture
async def plain(served_config: ServerConfig) -> AsyncIterator[Served]:
    """The same app with one more ``on_response_prepare`` hook: every reply is aiohttp's own."""
    app = create_app(served_config)
    app.on_response_prepare.append(_noop_hook)
    async for served in _serve(app):
        yield served
