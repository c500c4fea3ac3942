"""Where and when the client tries again: its replicas, its backoff, its deadline.

Pure asyncio, no aiohttp: ``transport`` decides what counts as a failure, this
module only how long to wait and which URL is next.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence
from urllib.parse import urlsplit

__all__ = ["ROUND_TRIP", "Backoff", "Deadline", "Replicas"]

ROUND_TRIP = 1.0
"""How long past its deadline a call's last request may still take: one round trip.

A request sent just before the deadline (a long-poll asked to wait exactly
what is left) is answered just after it; past this allowance the request is
dropped, whatever the server is doing (holding it, dripping its reply).
"""


class Backoff:
    """Exponential backoff with jitter: 50 ms, 100 ms, ... up to ``cap`` seconds."""

    def __init__(self, base: float = 0.05, cap: float = 2.0) -> None:
        self.base = base
        self.cap = cap
        self.attempt = 0

    def next_delay(self) -> float:
        delay = min(self.cap, self.base * 2**self.attempt)
        self.attempt += 1
        # Jitter keeps a whole deployment's clients from retrying in lockstep.
        return float(delay * random.uniform(0.5, 1.0))

    def reset(self) -> None:
        self.attempt = 0


class Deadline:
    """The moment a call gives up asking (``None`` never comes), and the moment its last request
    is dropped: ``overrun`` seconds later (one round trip; an ask-once call's whole time)."""

    def __init__(self, timeout: float | None, *, overrun: float = ROUND_TRIP) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._at = math.inf if timeout is None else loop.time() + max(0.0, timeout)
        self._end = self._at + overrun

    def remaining(self) -> float:
        """Seconds until the call gives up asking."""
        return max(0.0, self._at - self._loop.time())

    def expired(self) -> bool:
        return self.remaining() <= 0

    def left(self) -> float | None:
        """Seconds a request made now may take before the call must end; ``None`` for no end."""
        if math.isinf(self._end):
            return None
        return max(0.0, self._end - self._loop.time())


class Replicas:
    """The base URLs of one registry's replicas, and the one calls go to now.

    Calls stick to the current URL; a failure there moves every later call to
    the next one, round-robin. Concurrent calls that fail on the same URL
    move it once, not once each.
    """

    def __init__(self, urls: str | Sequence[str]) -> None:
        listed = [urls] if isinstance(urls, str) else list(urls)
        if not listed:
            raise ValueError("BootstrapClient needs at least one server URL")
        self.urls = tuple(_checked(url).rstrip("/") for url in listed)
        self._current = 0

    @property
    def current(self) -> str:
        return self.urls[self._current]

    def failed(self, url: str) -> None:
        if self.current == url:
            self._current = (self._current + 1) % len(self.urls)

    def describe(self) -> str:
        if len(self.urls) == 1:
            return f"The server at {self.urls[0]}"
        return f"None of the servers {', '.join(self.urls)}"


def _checked(url: str) -> str:
    """``url`` if it is an ``http://`` or ``https://`` URL with an address; a ``ValueError`` saying how to write
    it otherwise, when the client is made (``127.0.0.1:6789`` would fail only at the first call, as an invalid
    URL with no hint of the scheme it lacks)."""
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is not None and parts.scheme in ("http", "https") and parts.netloc:
        return url
    if isinstance(url, str) and "://" not in url:
        raise ValueError(f"{url!r} is not a server URL: give its scheme too, such as http://{url}")
    raise ValueError(
        f"{url!r} is not a server URL: give an http:// or https:// URL, such as http://127.0.0.1:6789"
    )
