"""A count that only goes up, that a reader can await past the value it saw, and that publishes each step.

What the page's watch follows besides the records: the waits parked or gone
(``parking``) and the encoder probes' changes
(``server/faces/encoders/health.py``). A reader says the count it last saw;
it is answered at once if the count has moved since, else at the next step.
Whoever must hear each step as it happens subscribes to :attr:`Tally.steps`
(the server's watch fast path does, to answer the page's watches).
"""

from __future__ import annotations

import asyncio
import contextlib

from .subscribers import CountListener, Subscribers

__all__ = ["Tally"]


class Tally:
    """See the top."""

    __slots__ = ("_next", "count", "steps")

    def __init__(self, what: str = "a tally's steps") -> None:
        """``what``: the steps, as a log line names them when a subscriber fails."""
        self.count = 0
        self.steps: Subscribers[CountListener] = Subscribers(what)
        """Hears each step, after :attr:`count` went up."""
        self._next: asyncio.Event | None = None
        """Set at the next step; made only when someone waits for it."""

    def step(self) -> None:
        self.count += 1
        event, self._next = self._next, None
        if event is not None:
            event.set()
        for listener in self.steps:
            try:
                listener.count_moved()
            except Exception:
                self.steps.failed()

    async def past(self, seen: int, timeout: float) -> None:
        """Return once :attr:`count` is past ``seen`` (at once if it is already), or after ``timeout`` s."""
        if self.count != seen or timeout <= 0:
            return
        if self._next is None:
            self._next = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._next.wait(), timeout)
