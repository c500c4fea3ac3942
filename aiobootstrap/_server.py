"""Serving the app on a socket, inside an event loop the caller already runs.

The server binds its socket itself, so a taken port fails right here with
:class:`AddressInUse`, not in a check made earlier that another process could
race.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import replace
from types import TracebackType
from typing import Any

from aiohttp import web

from ._app import REGISTRY, create_app
from ._config import ServerConfig
from ._registry import Registry
from .exceptions import BootstrapError

__all__ = ["AddressInUse", "BootstrapServer"]

_BACKLOG = 4096
"""Room for a whole deployment's ranks connecting at once (the kernel caps it at somaxconn)."""


class AddressInUse(BootstrapError, OSError):
    """The port is held by another process."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(
            f"Cannot listen on {host}:{port}: another process already holds port {port}; "
            "pick another with --port."
        )
        self.errno = errno.EADDRINUSE
        self.host = host
        self.port = port


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; port 0 lets the system choose."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise BootstrapError(f"Cannot listen on {host}:{port}: {exc.strerror}.") from None
    sock = socket.socket(family, kind, proto)
    try:
        # Lets a restarted server take its port back from connections in
        # TIME_WAIT; on Linux it never lets two servers share a live port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(_BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUse(host, port) from None
        raise BootstrapError(f"Cannot listen on {host}:{port}: {exc.strerror}.") from None
    sock.setblocking(False)
    return sock


class BootstrapServer:
    """An aiobootstrap server running in the current event loop.

    ::

        async with BootstrapServer(port=0) as server:
            print(server.url)

    Keyword arguments are :class:`ServerConfig` fields; pass ``config=`` for a
    whole config instead.
    """

    def __init__(self, config: ServerConfig | None = None, **options: Any) -> None:
        base = config if config is not None else ServerConfig()
        self.config = replace(base, **options) if options else base
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    async def start(self) -> None:
        """Bind, then serve; raises :class:`AddressInUse` if the port is taken."""
        if self._runner is not None:
            raise RuntimeError("the server is already started")
        sock = bind_socket(self.config.host, self.config.port)
        runner = web.AppRunner(
            create_app(self.config),
            handle_signals=False,
            # A client that hangs up stops its parked wait at once.
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=self.config.shutdown_timeout,
        )
        try:
            await runner.setup()
            # SockSite listen()s again with its own backlog (128 by default): pass ours.
            site = web.SockSite(runner, sock, shutdown_timeout=self.config.shutdown_timeout, backlog=_BACKLOG)
            await site.start()
        except BaseException:
            await runner.cleanup()
            sock.close()
            raise
        self._runner = runner
        self._port = int(sock.getsockname()[1])

    async def close(self) -> None:
        """Answer parked waits with 503, finish in-flight requests, stop listening."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> BootstrapServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def host(self) -> str:
        return self.config.host

    @property
    def port(self) -> int:
        """The port listened on: the real one when the config asked for 0."""
        if self._port is None:
            raise RuntimeError("the server is not started")
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def registry(self) -> Registry:
        """The live registry, for reading in-process."""
        if self._runner is None:
            raise RuntimeError("the server is not started")
        return self._runner.app[REGISTRY]
