"""Writing a reply's bytes: straight to the connection (counted as aiohttp counts), a large body a slice at a time.

asyncio's transport keeps what the socket does not take at once in a buffer
of its own, a copy (Python 3.11: a ``bytearray``). A body that a thousand
getters share was so copied once per client reading slowly, and held until
it had read it all or hung up. Written a slice at a time, each slice after
the connection drained, a client that does not read holds one slice of it.
"""

from __future__ import annotations

from aiohttp import web

from ..aiohttp_internals import count_written

__all__ = ["SLICE", "write", "write_sliced", "write_stream"]

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


async def write_stream(response: web.StreamResponse, body: bytes) -> None:
    """Write ``body`` through a prepared ``response`` a slice at a time (aiohttp drains past 64 KiB)."""
    view = memoryview(body)
    for start in range(0, len(view), SLICE):
        await response.write(view[start : start + SLICE])
