"""What a ``reregister=True`` client knows of the server's boots.

Every reply names the server's boot id (``X-Aiobootstrap-Boot``); a new id
means the server restarted, and an in-memory server lost what the client had
registered, so the client replays its registrations. The HTTP side lives in
``transport``; this is the bookkeeping, and the single-flight probe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable, Mapping
from typing import Any, NamedTuple

__all__ = ["Replay", "RestartWatch"]


class Replay(NamedTuple):
    """A registration to send again after a restart: the request as it was sent."""

    method: str
    path: str
    body: bytes
    params: Mapping[str, str] | None = None
    """Its query (Mooncake's ``?key=``), if any."""
    lease_header: str | None = None
    """The header a lease travels in, for a body that is the value itself (Mooncake's); ``None``: the
    body's ``"lease"`` field."""


class RestartWatch:
    """What the client knows of the server's boots, and the registrations to replay after one.

    Every reply names the server's boot id; a new id means the server
    restarted, and an in-memory server lost what we had registered. A reply
    to a long-poll comes only when the wait ends, so while there is anything
    to replay, a request that parks is preceded by a ``/health`` probe: one
    probe in flight serves every request that parks meanwhile.
    """

    def __init__(self, reregister: bool) -> None:
        self.enabled = reregister
        self.boot: str | None = None
        self.suspect = False
        """The server failed to answer: ask its boot before the next call."""
        self.lock = asyncio.Lock()
        self._registrations: dict[Hashable, Replay] = {}
        """By what the registration names: (path, role, rank) for a rank's record, (path, url) for a URL."""
        self._pending = False
        self._probe: asyncio.Future[object] | None = None

    def remember(self, key: Hashable, replay: Replay) -> None:
        if self.enabled:
            self._registrations[key] = replay

    def forget(self, key: Hashable, replay: Replay | None = None) -> None:
        if replay is None or self._registrations.get(key) == replay:
            self._registrations.pop(key, None)

    def went_away(self) -> None:
        self.suspect = self.enabled and bool(self._registrations)

    def should_probe(self, parks: bool) -> bool:
        return self.suspect or (parks and self.enabled and bool(self._registrations))

    async def probe(self, send: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """Send (or join) one probe; ``_exchange`` sees the boot header of its reply."""
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(send())
            # Retrieved here: every caller may have been cancelled before it ends.
            self._probe.add_done_callback(lambda done: done.cancelled() or done.exception())
        # Shielded: one caller cancelled must not cancel the probe the others wait for.
        await asyncio.shield(self._probe)
        self.suspect = False

    def saw(self, boot: str | None) -> None:
        if boot is None or boot == self.boot:
            return
        if self.boot is not None and self.enabled:
            self._pending = True
        self.boot = boot

    def take_replay(self) -> dict[Hashable, Replay]:
        """The registrations to send again, once per restart seen."""
        if not self._pending:
            return {}
        self._pending = False
        return dict(self._registrations)

    def replay_failed(self) -> None:
        self._pending = True
