"""Serving the app on a socket, inside an event loop the caller already runs.

The server binds its socket itself, so a taken port fails right here with
:class:`AddressInUse`, not in a check made earlier that another process could
race.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.log import access_logger

from .._logging import http_logger
from .._names import host_port
from ..core.registry import Registry
from ..exceptions import BootstrapError
from .access import GUARD
from .access_log import ACCESS_LOG_FORMAT, RefusalsLimitedAccessLogger
from .aiohttp_internals import ProtocolSite, wrap_request_handler
from .app import REGISTRY, create_app, release_waiters
from .bind import BACKLOG, AddressInUse, bind_each, bind_sockets, explain_address_in_use
from .config import ServerConfig
from .connections import ConnectionTable
from .face_registry import with_options
from .listeners import LISTENING, Listening, route_by_port
from .open_files import connection_limit
from .tokens import TokenSet

__all__ = ["AddressInUse", "BootstrapServer", "runner_options", "ssl_context"]

_T = TypeVar("_T")


def runner_options(config: ServerConfig) -> dict[str, Any]:
    """The ``web.AppRunner`` keywords that enforce the config's connection limits."""
    return {
        "logger": http_logger(),
        "max_line_size": config.max_request_line,
        "max_field_size": config.max_header_size,
        # aiohttp closes a connection that waits this long for a complete
        # request head, at its start as between requests: this is the
        # guard against clients that connect and never send (slowloris).
        "keepalive_timeout": config.idle_timeout,
        # Bodies reach read_body as sent, which refuses compressed ones with a
        # JSON 415: no decompression bomb, and no decoder failing inside
        # aiohttp's parser with a plain-text 400.
        "auto_decompress": False,
        # After a reply to a request whose body was left unread (a 413, 408,
        # 503 or 401 before the body), close the connection at once instead
        # of reading and dropping the rest of the body for 10 s.
        "lingering_time": 0,
    }


def ssl_context(config: ServerConfig) -> ssl.SSLContext | None:
    """The server's TLS context, or ``None`` to serve plain HTTP."""
    if config.tls_cert is None or config.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(config.tls_cert, config.tls_key)
    except OSError as exc:  # ssl.SSLError included
        raise BootstrapError(
            f"Cannot load the TLS certificate {config.tls_cert} with key {config.tls_key}: "
            f"{exc.strerror or exc}."
        ) from None
    return context


_WILDCARDS = ("0.0.0.0", "::", "")


def _dual_stack(socks: Sequence[socket.socket]) -> bool:
    """Whether IPv4 clients reach these sockets (an IPv4 one, or an IPv6 one that is not IPv6-only)."""
    for sock in socks:
        if sock.family == socket.AF_INET:
            return True
        if sock.family == socket.AF_INET6 and not sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY):
            return True
    return False


def _reachable_address(family: socket.AddressFamily) -> str:
    """This machine's address on its default route (what another host would use), else loopback.

    A UDP socket "connected" to an address outside any network sends
    nothing; the address the system picks for it is the primary one.
    """
    probe, loopback = ("192.0.2.1", "127.0.0.1") if family == socket.AF_INET else ("2001:db8::1", "::1")
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as udp:
            udp.connect((probe, 9))
            address = str(udp.getsockname()[0])
    except OSError:
        return loopback
    return address if address not in ("0.0.0.0", "::") else loopback


def _url(scheme: str, host: str, socks: Sequence[socket.socket]) -> str:
    """The URL to reach ``socks`` (bound on ``host``) at: for a wildcard host, this machine's address."""
    if host in _WILDCARDS:
        host = _reachable_address(
            socket.AF_INET6 if ":" in host and not _dual_stack(socks) else socket.AF_INET
        )
    return f"{scheme}://{host_port(host, int(socks[0].getsockname()[1]))}"


def _listening(config: ServerConfig, listened: Sequence[Sequence[socket.socket]]) -> Listening:
    """The listeners of ``config.listen``, bound on ``listened`` (theirs, in order): each namespace's URL,
    and the namespace of each real port."""
    urls, ports = [], {}
    for listener, bound in zip(config.listen, listened, strict=True):
        urls.append((listener.namespace, _url(config.scheme, listener.address(config.host)[0], bound)))
        ports[int(bound[0].getsockname()[1])] = listener.namespace
    return Listening(tuple(urls), ports)


async def _bound(bind: Callable[[], _T]) -> _T:
    """``bind()``; a taken port explained (its holder named), in a worker thread: the probe blocks briefly,
    and the holder may be a server on this very loop, which must stay free to answer it."""
    try:
        return bind()
    except AddressInUse as exc:
        raise await asyncio.to_thread(explain_address_in_use, exc) from None


class BootstrapServer:
    """An aiobootstrap server running in the current event loop.

    ::

        async with BootstrapServer(port=0) as server:
            print(server.url)

    Keyword arguments are :class:`ServerConfig` fields, or fields of a face's
    settings (``dp_room_ttl=60``: ``face_registry.with_options``); pass
    ``config=`` for a whole config instead.
    """

    def __init__(self, config: ServerConfig | None = None, **options: Any) -> None:
        base = config if config is not None else ServerConfig()
        self.config = with_options(base, options) if options else base
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._connections: ConnectionTable | None = None
        self._url = ""
        self._listeners: tuple[tuple[str, str], ...] = ()

    async def start(
        self,
        sock: socket.socket | Sequence[socket.socket] | None = None,
        *,
        listen_socks: Sequence[Sequence[socket.socket]] | None = None,
    ) -> None:
        """Bind, then serve; raises :class:`AddressInUse` if a port is taken.

        ``sock``, a socket (or several, one port on several addresses) already
        bound and listening (``server.bind.bind_sockets``), is served instead of
        binding ``host:port``; ``listen_socks``, the sockets of each of
        ``config.listen`` in its order (``server.bind.bind_each``), instead of
        binding theirs.
        """
        if self._runner is not None:
            raise RuntimeError("the server is already started")
        tls = ssl_context(self.config)
        if sock is None:
            socks = await _bound(lambda: bind_sockets(self.config.host, self.config.port))
        else:
            socks = [sock] if isinstance(sock, socket.socket) else list(sock)
        listening = self.config.listen
        try:
            if listen_socks is None:
                addresses = [listener.address(self.config.host) for listener in listening]
                listened = await _bound(lambda: bind_each(addresses))
            elif len(listen_socks) != len(listening):
                raise ValueError(
                    f"listen_socks has {len(listen_socks)} entries for {len(listening)} listeners"
                )
            else:
                listened = [list(each) for each in listen_socks]
        except BaseException:
            for each in [*socks, *(sock for bound in listen_socks or () for sock in bound)]:
                each.close()
            raise
        everything = [*socks, *(each for bound in listened for each in bound)]
        try:
            served = _listening(self.config, listened)
            app = create_app(self.config)
        except BaseException:
            for each in everything:
                each.close()
            raise
        if listening:
            app[LISTENING] = served
        runner = web.AppRunner(
            app,
            handle_signals=False,
            # A client that hangs up stops its parked wait at once.
            handler_cancellation=True,
            access_log=access_logger if self.config.access_log else None,
            access_log_class=RefusalsLimitedAccessLogger,
            access_log_format=ACCESS_LOG_FORMAT,
            # aiohttp waits this long twice for a stuck connection (to finish,
            # then once cancelled): half each keeps a stop within shutdown_timeout.
            shutdown_timeout=self.config.shutdown_timeout / 2,
            **runner_options(self.config),
        )
        try:
            await runner.setup()
            assert runner.server is not None  # set up above
            connections = ConnectionTable(runner.server, connection_limit(self.config.max_connections))
            if listening:
                # Before any connection opens: each takes the server's request handler as it is made.
                wrap_request_handler(runner.server, route_by_port(served.ports))
            for each in everything:
                # A site listens again with a backlog of its own (128 unless told): keep ours.
                await ProtocolSite(
                    runner, each, connections.protocol, ssl_context=tls, backlog=BACKLOG
                ).start()
        except BaseException:
            await runner.cleanup()
            for each in everything:
                each.close()
            raise
        self._runner = runner
        self._connections = connections
        self._port = int(socks[0].getsockname()[1])
        self._url = _url(self.config.scheme, self.host, socks)
        self._listeners = served.listeners

    async def close(self) -> None:
        """Stop listening, answer parked waits with 503, finish in-flight requests.

        The parked waits are answered here rather than by their handlers:
        ready-made bytes in one write each, then the connection closed and
        the handler's task cancelled. That is several times cheaper per wait
        than waking each handler to build a 503 and letting aiohttp shut each
        connection down (docs/benchmarks.md). What is left in flight then
        (registrations, a reply being written) gets aiohttp's graceful
        shutdown, ``shutdown_timeout`` in all; before it, the answered
        connections are given up to half that to close (TLS peers may be slow
        to acknowledge).
        """
        runner, self._runner = self._runner, None
        if runner is None:
            return
        # First, stop listening: nothing new arrives while the rest is answered.
        for site in list(runner.sites):
            await site.stop()
        # The app's one way to let parked waits go, here with our connections (its on_shutdown, later, is a no-op).
        await release_waiters(runner.app, self._connections, self.config.shutdown_timeout / 2)
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
        """The URL to reach the server at: for a wildcard host (``0.0.0.0``, ``::``), this machine's address."""
        if self._runner is None:
            raise RuntimeError("the server is not started")
        return self._url

    @property
    def listeners(self) -> tuple[tuple[str, str], ...]:
        """``(namespace, url)`` of each listener of one namespace (``config.listen``), in its order: the URL
        whose unprefixed routes are that namespace's, with the real port when 0 asked for one."""
        if self._runner is None:
            raise RuntimeError("the server is not started")
        return self._listeners

    @property
    def app(self) -> web.Application:
        """The aiohttp application being served."""
        if self._runner is None:
            raise RuntimeError("the server is not started")
        return self._runner.app

    def rotate_tokens(self, tokens: TokenSet) -> None:
        """Put ``tokens`` in force at once (the CLI does it on ``SIGHUP``).

        The next request is checked against them; parked waits and open
        connections are left alone. A server started without tokens has none
        to rotate: ``RuntimeError``.
        """
        guard = self.app.get(GUARD)
        if guard is None:
            raise RuntimeError("the server was started without auth tokens: there are none to rotate")
        guard.tokens = tokens

    @property
    def connections(self) -> ConnectionTable:
        """The open connections: how many, how many idle, how many were shed to make room."""
        if self._connections is None:
            raise RuntimeError("the server is not started")
        return self._connections

    @property
    def registry(self) -> Registry:
        """The live registry, for reading in-process."""
        if self._runner is None:
            raise RuntimeError("the server is not started")
        return self._runner.app[REGISTRY]
