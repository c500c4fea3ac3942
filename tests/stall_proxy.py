"""A TCP proxy of the tests' own, in the test's loop: it forwards, or stalls, the connections through it.

Point a store's call pool at :attr:`StallProxy.url` and its feed straight at
Redis, and the calls alone can be made to hang: :meth:`stall` stops
forwarding (what the client sends is held back, so every call runs into its
deadline), :meth:`heal` resets every connection that was stalled (their
protocol state is lost) and forwards new ones again.
"""

from __future__ import annotations

import asyncio
import contextlib


class StallProxy:
    def __init__(self, upstream_port: int) -> None:
        self._upstream_port = upstream_port
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._stalled = False
        self.held = 0
        """Chunks a client sent while stalled, which never reached Redis."""
        self.port = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self._reset()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def stall(self) -> None:
        self._stalled = True

    def heal(self) -> None:
        self._reset()
        self._stalled = False

    def _reset(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._upstream_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.add(up_writer)
        await asyncio.gather(
            self._pump(reader, up_writer, held=True),
            self._pump(up_reader, writer, held=False),
            return_exceptions=True,
        )
        for each in (writer, up_writer):
            each.transport.abort()
            self._writers.discard(each)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, held: bool) -> None:
        with contextlib.suppress(OSError):
            while chunk := await reader.read(65536):
                if self._stalled:
                    # A connection that stalled stays stalled: heal() resets it.
                    self.held += held
                    continue
                writer.write(chunk)
                await writer.drain()
        writer.transport.abort()
