"""Writing a reply's bytes: straight to the connection (counted as aiohttp counts), a large body a slice at a time.

asyncio's transport keeps what the socket does not take at once in a buffer
of its own, a copy (Python 3.11: a ``bytearray``). A body that a thousand
getters share was so copied once per client reading slowly, and held until
it had read it all or hung up. Written a slice at a time, each slice after
the connection drained, a client that does not read holds one slice of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from aiohttp import web

from ..aiohttp_internals import count_written

__all__ = ["SLICE", "Body", "slices", "write", "write_sliced", "write_stream"]

Body = bytes | Sequence[bytes]
"""A reply's body: one ``bytes``, or parts written one after the other (a batch's: ``batches.Parts``)."""

SLICE = 256 * 1024
"""The most of a large body a connection's buffer takes at once (besides its high-water mark, 64 KiB)."""


def write(request: web.BaseRequest, data: bytes | memoryview) -> bool:
    """Write ``data`` on the request's connection, counted as aiohttp counts; ``False`` if it is gone."""
    transport = request.transport
    if transport is None or transport.is_closing():
        return False
    transport.write(data)
    count_written(request, len(data))
    return True


async def write_sliced(request: web.BaseRequest, body: bytes) -> bool:
    """:func:`write` ``body`` a slice at a time, each once the connection has drained; ``False`` if it went."""
    view = memoryview(body)
    for start in range(0, len(view), SLICE):
        await request.writer.drain()
        if not write(request, view[start : start + SLICE]):
            return False
    return True


def slices(body: Body) -> Iterator[bytes | memoryview]:
    """``body``'s bytes in order, :data:`SLICE` bytes at most each: views of a large part, never copies."""
    for part in (body,) if isinstance(body, bytes) else body:
        if len(part) <= SLICE:
            yield part
            continue
        view = memoryview(part)
        for start in range(0, len(view), SLICE):
            yield view[start : start + SLICE]


async def write_stream(response: web.StreamResponse, body: Body) -> None:
    """Write ``body`` through a prepared ``response`` a slice at a time (aiohttp drains past 64 KiB)."""
    for chunk in slices(body):
        await response.write(chunk)
