"""A lean HTTP/1.1 client on raw asyncio sockets.

The benchmarks measure the server, not the load generator: an aiohttp client
parsing a thousand replies in one process would take longer than the server
takes to send them. A :class:`Connection` is an ``asyncio.Protocol`` that
sends pre-encoded request bytes, notes when the first byte of the reply
arrives, and reads the body by its ``Content-Length`` (both servers send one),
without parsing anything else.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["Connection", "Reply", "Target", "connect", "get_request", "put_request"]


@dataclass(frozen=True, slots=True)
class Target:
    """Where a server listens."""

    host: str
    port: int

    @classmethod
    def from_url(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"not a server address: {url}")
        return cls(parts.hostname, parts.port)


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is several times slower
class Reply:
    status: int
    body: bytes
    """Empty when the connection was told not to keep bodies (only the length is kept)."""
    length: int
    sent_at: float
    first_byte_at: float
    done_at: float


def get_request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()


def put_request(path: str, body: bytes) -> bytes:
    head = (
        f"PUT {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class Connection(asyncio.Protocol):
    """One keep-alive connection; one request in flight at a time."""

    def __init__(self, keep_body: bool = True) -> None:
        self._keep_body = keep_body
        self._transport: asyncio.WriteTransport | None = None
        self._buffer = bytearray()
        self._reply: asyncio.Future[Reply] | None = None
        self._sent_at = 0.0
        self._first_byte_at = 0.0
        self._status = 0
        self._body_start = -1
        self._length = 0
        self._received = 0
        self.requests = 0
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self._transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(ConnectionError(f"connection lost before the reply: {exc}"))
        if not self.closed.done():
            self.closed.set_result(None)

    def send(self, request: bytes) -> asyncio.Future[Reply]:
        """Send ``request``; the future holds the reply."""
        if self._transport is None or self._transport.is_closing():
            raise ConnectionError("the connection is closed")
        self._reply = asyncio.get_running_loop().create_future()
        self._buffer.clear()
        self._body_start = -1
        self._received = 0
        self._first_byte_at = 0.0
        self.requests += 1
        self._sent_at = time.perf_counter()
        self._transport.write(request)
        return self._reply

    async def request(self, request: bytes) -> Reply:
        return await self.send(request)

    def data_received(self, data: bytes) -> None:
        # Lean on purpose: a thousand replies arrive back to back, and this
        # process must read them faster than the server writes them, or the
        # figures measure the client (this takes about half the time it did).
        if self._first_byte_at == 0.0:
            self._first_byte_at = time.perf_counter()
        if self._body_start < 0:
            if self._buffer:
                self._buffer += data
                data = bytes(self._buffer)
                self._buffer.clear()
            end = data.find(b"\r\n\r\n")
            if end < 0:
                self._buffer += data
                return
            self._parse_head(data[:end])
            self._body_start = end + 4
            self._received = len(data) - self._body_start
            if self._keep_body:
                self._buffer += data
        else:
            self._received += len(data)
            if self._keep_body:
                self._buffer += data
        if self._received >= self._length:
            self._finish()

    def _parse_head(self, head: bytes) -> None:
        self._status = int(head[9:12])  # "HTTP/1.1 200 ..."
        lower = head.lower()
        start = lower.find(b"\r\ncontent-length:")
        if start < 0:
            raise ConnectionError("the reply has no Content-Length")
        end = lower.find(b"\r\n", start + 2)
        self._length = int(head[start + 17 : end if end >= 0 else len(head)])

    def _finish(self) -> None:
        done_at = time.perf_counter()
        body = bytes(self._buffer[self._body_start :]) if self._keep_body else b""
        reply = Reply(self._status, body, self._length, self._sent_at, self._first_byte_at, done_at)
        self._buffer.clear()
        self._body_start = -1
        if self._reply is not None and not self._reply.done():
            self._reply.set_result(reply)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def connect(target: Target, keep_body: bool = True) -> Connection:
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(lambda: Connection(keep_body), target.host, target.port)
    return protocol
