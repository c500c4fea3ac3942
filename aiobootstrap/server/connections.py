"""A cap on open connections that keeps a seat for the next client.

How it works. Every connection is a file descriptor, and when the process
runs out of them ``accept()`` fails: nobody gets in, health checks and
registrations included, and the kernel queue of waiting clients only grows.
Idle keep-alive connections are the cheap way to get there (they live
``--idle-timeout`` seconds, 620 by default). So the server counts its
connections and, when a new one would take it past ``max_connections``,
closes the connection that has been idle longest to make room, as nginx
reuses keep-alive connections when it runs short. Idle means no request in
flight: a parked long-poll is a request in flight and is never shed. Only
when every connection is busy is the newcomer itself closed.

The table also knows which task handles which request, so a stopping server
can answer its parked waits itself (:meth:`ConnectionTable.answer`): one
write of ready-made bytes, the connection closed, the handler's task
cancelled. aiohttp's own way, waking each handler to build its reply and
then shutting each connection down in a task of its own, took seconds for
ten thousand parked waits (docs/benchmarks.md).

Each connection's asyncio protocol is aiohttp's own, wrapped in a
:class:`_Tracked` that notes when bytes last arrived; the server's request
handler is wrapped to note when a request starts and ends. Both hooks bend
aiohttp, so both go through ``server/aiohttp_internals.py``, whose contract
test pins them; ``tests/test_connections.py`` pins what the table makes of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import web

from .._logging import RateLimited
from .aiohttp_internals import Handle, reply_begun, short_parse_errors, wrap_request_handler

__all__ = ["ConnectionTable"]

log = logging.getLogger("aiobootstrap")


class _Tracked(asyncio.Protocol):
    """aiohttp's protocol for one connection, with the table told what happens to it.

    It forwards each ``asyncio.Protocol`` callback, which is all of aiohttp's
    protocol (``tests/test_aiohttp_internals.py`` checks it is no ``BufferedProtocol``).
    """

    __slots__ = ("busy", "closed", "handler", "idle", "table", "transport")

    def __init__(self, handler: web.RequestHandler, table: ConnectionTable) -> None:
        self.handler = handler
        self.table = table
        self.idle = table._idle
        self.transport: asyncio.BaseTransport | None = None
        self.busy = 0  # requests of this connection being handled now
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.handler.connection_made(transport)
        self.table.made(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.table.lost(self)
        self.handler.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # Bytes arrived: an idle connection goes to the back of the idle order (here, not in a
        # method of the table: this runs for every read of every connection).
        if not self.busy and not self.closed:
            idle = self.idle
            idle.pop(self, None)
            idle[self] = None
        self.handler.data_received(data)

    def eof_received(self) -> bool | None:
        # aiohttp's answer (None): the transport closes, a half-close is a hang-up (docs/operations.md).
        self.handler.eof_received()
        return None

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class ConnectionTable:
    """The open connections of one server, ordered by how long each has been idle.

    Install it on a runner's ``web.Server`` before any connection opens, and
    serve with :meth:`protocol` as the protocol factory.
    """

    def __init__(self, server: web.Server, limit: int | None) -> None:
        self.limit = limit
        self.open = 0
        self.shed = 0
        """Connections closed to make room, since the start."""
        self._server = server
        self._by_handler: dict[web.RequestHandler, _Tracked] = {}
        # Connections without a request in flight, longest idle first (dicts keep insertion order).
        self._idle: dict[_Tracked, None] = {}
        self._log = RateLimited(log)
        # The request each handler task is answering, and on which connection.
        self._by_task: dict[asyncio.Task[Any], tuple[_Tracked, web.BaseRequest]] = {}
        # Connections closed by answer() whose loss is still to come, and who waits for that.
        self._closing: set[_Tracked] = set()
        self._all_lost: asyncio.Future[None] | None = None
        wrap_request_handler(server, self._wrap)

    def protocol(self) -> asyncio.Protocol:
        """A new connection's protocol: the protocol factory to serve with."""
        handler = self._server()
        short_parse_errors(handler)
        return _Tracked(handler, self)

    @property
    def idle(self) -> int:
        return len(self._idle)

    def made(self, conn: _Tracked) -> None:
        self.open += 1
        self._by_handler[conn.handler] = conn
        self._idle[conn] = None
        if self.limit is not None and self.open > self.limit:
            self._make_room(conn)

    def lost(self, conn: _Tracked) -> None:
        self.open -= 1
        self._idle.pop(conn, None)
        self._by_handler.pop(conn.handler, None)
        if self._closing:
            self._closing.discard(conn)
            if not self._closing and self._all_lost is not None and not self._all_lost.done():
                self._all_lost.set_result(None)

    def answer(self, tasks: Iterable[asyncio.Task[Any]], reply: Callable[[web.BaseRequest], bytes]) -> int:
        """Answer the requests that ``tasks`` are handling with ``reply``'s bytes; how many were answered.

        For each request of this table that has nothing written yet, on a
        connection still open: one write, the connection closed (its
        buffered bytes are still sent), and the handler's task cancelled,
        so it writes nothing more. Other tasks are left alone.
        """
        answered = 0
        for task in tasks:
            entry = self._by_task.get(task)
            if entry is None:
                continue
            conn, request = entry
            transport = request.transport
            # Something written already (a reply begun): that request is not this one's to answer.
            if transport is None or transport.is_closing() or reply_begun(request):
                continue
            transport.write(reply(request))
            conn.close()
            task.cancel()
            self._closing.add(conn)
            answered += 1
        return answered

    async def answered_closed(self, timeout: float) -> None:
        """Until the connections that :meth:`answer` closed are gone (at most ``timeout`` seconds)."""
        if not self._closing:
            return
        self._all_lost = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._all_lost
        except TimeoutError:
            pass  # a TLS peer slow to close: aiohttp's shutdown takes it from here
        finally:
            self._all_lost = None

    def _make_room(self, newcomer: _Tracked) -> None:
        victim = next((conn for conn in self._idle if conn is not newcomer), None)
        if victim is None:
            self._log.log(
                logging.WARNING,
                "connection limit %d reached and every connection has a request in flight: "
                "closed a new connection (see --max-connections)",
                self.limit,
            )
            victim = newcomer
        else:
            self.shed += 1
            self._log.log(
                logging.WARNING,
                "connection limit %d reached: closed the longest-idle connection to make room "
                "(see --max-connections)",
                self.limit,
            )
        self._idle.pop(victim, None)
        victim.close()

    def _wrap(self, handle: Handle) -> Handle:
        async def handle_tracked(request: web.BaseRequest) -> web.StreamResponse:
            conn = self._by_handler.get(request.protocol)
            if conn is None:  # not served through protocol() (a test server): nothing to track
                return await handle(request)
            conn.busy += 1
            self._idle.pop(conn, None)
            task = asyncio.current_task()
            if task is not None:
                self._by_task[task] = (conn, request)
            try:
                return await handle(request)
            finally:
                if task is not None:
                    del self._by_task[task]
                conn.busy -= 1
                if not conn.busy and not conn.closed:
                    self._idle[conn] = None

        return handle_tracked
