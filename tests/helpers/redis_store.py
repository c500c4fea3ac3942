"""A Redis store as the tests open one: short deadlines, and a change listener a test can await."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from aiobootstrap.store import Change, Key

from .waits import GUARD

FAST = {"timeout": GUARD / 2, "open_timeout": 1.0, "poll_interval": 0.1}
"""Deadlines within a test's patience (``GUARD``) and a quick watcher, so that faults show in time.

A call's deadline is no measurement either: 0.5 s, then 2 s, failed healthy calls (and the feed
reader's read, logging a WARNING) on a shared machine with two CPU burners beside the suite."""


class Recorder:
    """A ChangeListener that keeps what it heard and lets a test await it."""

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.resyncs = 0
        self._event = asyncio.Event()

    def changed(self, changes: Sequence[Change]) -> None:
        self.changes.extend(changes)
        self._poke()

    def resync(self) -> None:
        self.resyncs += 1
        self._poke()

    def _poke(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def until(self, predicate: Callable[[], bool], guard: float = GUARD) -> None:
        async with asyncio.timeout(guard):
            while not predicate():
                await self._event.wait()

    def resynced(self) -> bool:
        return self.resyncs > 0

    def heard(self, key: Key, version: int) -> bool:
        return any(change.key == key and change.version == version for change in self.changes)

    def about(self, key: Key) -> list[Change]:
        return [change for change in self.changes if change.key == key]
