"""The turns of the loop the large writes share: at most :data:`TURN_BYTES` of their slices per turn, in order.

A writer that gives the loop a turn between two slices still shares that
turn with every other writer: five hundred fast readers of a 4 MiB record
took five hundred 256 KiB slices a turn, 128 MiB of copying into sockets
(~110 ms on a loaded machine), and a ``/health`` that needs a few turns to
be read, handled and answered waited 300 ms and more. A writer asks
:meth:`Turns.take` before each slice (``writes``) and waits, in the order
they asked, for a turn with room: a turn writes :data:`TURN_BYTES` of large
bodies at most, whatever the number of readers, and every other request is
heard within a few of them.

One :class:`Turns` per loop (a thread's loop: :func:`turns`); nothing is
kept but the writers waiting, each released once.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque

__all__ = ["TURN_BYTES", "Turns", "turns"]

TURN_BYTES = 4 << 20
"""The most bytes of large bodies written in one turn of the loop (a few ms of copying into sockets)."""


class Turns:
    """The writers of large bodies waiting for a turn of ``loop``, in the order they asked."""

    __slots__ = ("_next", "_waiting", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._waiting: deque[tuple[asyncio.Future[None], int]] = deque()
        self._next: asyncio.Handle | None = None
        """The next turn's release of waiting writers, when some wait."""

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def take(self, size: int) -> None:
        """Wait for a turn with room for ``size`` more bytes, after the writers that asked before."""
        waiter = self.loop.create_future()
        self._waiting.append((waiter, size))
        if self._next is None:
            self._next = self.loop.call_soon(self._turn)
        await waiter

    def _turn(self) -> None:
        """A new turn: release the first writers waiting, :data:`TURN_BYTES` of them (one at least)."""
        self._next = None
        room = TURN_BYTES
        waiting = self._waiting
        while waiting and room > 0:
            waiter, size = waiting.popleft()
            if not waiter.done():  # a writer cancelled (its client gone) takes no room
                waiter.set_result(None)
                room -= size
        if waiting:
            # After the released writers' steps: the next turn's release.
            self._next = self.loop.call_soon(self._turn)


_local = threading.local()


def turns() -> Turns:
    """The running loop's :class:`Turns` (each thread runs one loop at most)."""
    loop = asyncio.get_running_loop()
    current: Turns | None = getattr(_local, "turns", None)
    if current is None or current.loop is not loop:
        current = _local.turns = Turns(loop)
    return current
