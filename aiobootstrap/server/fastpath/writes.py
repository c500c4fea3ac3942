"""Writing a reply's bytes: straight to the connection (counted as aiohttp counts), a large body a slice at a time.

asyncio's transport keeps what the socket does not take at once in a buffer
of its own, a copy (Python 3.11: a ``bytearray``). A body that a thousand
getters share was so copied once per client reading slowly, and held until
it had read it all or hung up. Written a slice at a time, each slice after
the connection drained, a client that does not read holds one slice of it.

A client that reads fast never makes the connection wait: its socket takes
slice after slice (loopback's, megabytes), and a handler that only drained
between them wrote its whole body in one step of the loop. Five hundred
readers of one 4 MiB record woken together were 2 GiB of copying into
sockets before the loop looked at anything else (``/health``: 1-2 s).
Before each slice a writer now waits for a turn of the loop with room for
it (:func:`_turn`, ``turns``): the readers get their slices in turn, a turn
holds a few MiB of them however many readers there are, and a request that
came in meanwhile is heard within a few turns. The slices are views of the
one shared body (:func:`slices`), never a copy per reader.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from aiohttp import web

from ..aiohttp_internals import count_written
from .turns import turns

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


async def _turn(request: web.BaseRequest, size: int) -> None:
    """Before a slice of ``size`` bytes: wait for the connection to drain if it must, then for a turn of the
    loop with room for it (``turns``)."""
    if request.protocol.writing_paused:
        await request.writer.drain()
    await turns().take(size)


async def write_sliced(request: web.BaseRequest, body: Body) -> bool:
    """:func:`write` ``body`` a slice at a time, each once the connection has drained and a turn of the loop
    has room for it; ``False`` if the connection went."""
    for chunk in slices(body):
        await _turn(request, len(chunk))
        if not write(request, chunk):
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


async def write_stream(request: web.BaseRequest, response: web.StreamResponse, body: Body) -> None:
    """Write ``body`` through ``response``, prepared for ``request``, a slice at a time (aiohttp drains past
    64 KiB), each in a turn of the loop with room for it."""
    first = True
    for chunk in slices(body):
        if first and isinstance(chunk, memoryview):
            # aiohttp sends its buffered head with the first write, joined to it (Python < 3.12.9):
            # a copy of a slice of the shared body per reply. Sent alone, the body is never copied.
            await response.write(b"")
        first = False
        await _turn(request, len(chunk))
        await response.write(chunk)
