"""A count that only goes up, that a reader can await past the value it saw, with one hook told of each step.

What the page's watch follows besides the records: the waits parked or gone
(``_parking``) and the encoder probes' changed findings
(``server.encoder_health``). A reader says the count it last saw; it is
answered at once if the count has moved since, else at the next step.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

__all__ = ["Tally"]


class Tally:
    """See the top. :attr:`hook` hears each step (the server's watch fast path answers the page's watches)."""

    __slots__ = ("_next", "count", "hook")

    def __init__(self) -> None:
        self.count = 0
        self.hook: Callable[[], None] | None = None
        self._next: asyncio.Event | None = None
        """Set at the next step; made only when someone waits for it."""

    def step(self) -> None:
        self.count += 1
        event, self._next = self._next, None
        if event is not None:
            event.set()
        if self.hook is not None:
            self.hook()

    async def past(self, seen: int, timeout: float) -> None:
        """Return once :attr:`count` is past ``seen`` (at once if it is already), or after ``timeout`` s."""
        if self.count != seen or timeout <= 0:
            return
        if self._next is None:
            self._next = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._next.wait(), timeout)
