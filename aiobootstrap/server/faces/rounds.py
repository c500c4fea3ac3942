"""Rounds every interval, as a task that lives with the app: how a face probes what its records name
(the encoder URLs' ``/health``, Mooncake engines' RPC addresses), shared so that no face imports another;
and :class:`LoopStalls`, which tells a probe that timed out whether the loop itself held it up."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from ...core.registry import Registry
from ...exceptions import BootstrapError

__all__ = ["LoopStalls", "every", "running"]

log = logging.getLogger("aiobootstrap")

T = TypeVar("T")


async def every(interval: float, round: Callable[[], Awaitable[None]], registry: Registry, what: str) -> None:
    """Run ``round`` every ``interval`` seconds until cancelled or the registry closes; a round the store
    refuses is logged (``what round skipped: ...``) and the next one tries again."""
    while True:
        await asyncio.sleep(interval)
        try:
            await round()
        except BootstrapError as exc:
            if registry.closed:
                return  # the server is stopping
            log.warning("%s round skipped: %s", what, exc.detail)


@contextlib.asynccontextmanager
async def running(work: Coroutine[Any, Any, None], name: str) -> AsyncIterator[None]:
    """``work`` as a task for as long as the block runs; cancelled, and waited for, at its end."""
    task = asyncio.create_task(work, name=name)
    try:
        yield
    finally:
        task.cancel()
        await asyncio.wait([task])


class LoopStalls:
    """The seconds the event loop was held up (busy elsewhere, or the process not scheduled) while
    :meth:`run` ticks: a probe whose timeout fired while the loop was held up did not get its time, and a
    prober does not count its failure (the reply may be sitting unread in the socket)."""

    def __init__(self, tick: float) -> None:
        self._tick = tick
        self._held = 0.0
        self._last: float | None = None

    def held(self) -> float:
        """Seconds held up so far, the hold-up in progress included; never decreases."""
        if self._last is None:
            return self._held
        now = asyncio.get_running_loop().time()
        return self._held + max(0.0, now - self._last - self._tick)

    async def run(self) -> None:
        """Tick every ``tick`` seconds until cancelled, adding each tick's lateness to :meth:`held`."""
        loop = asyncio.get_running_loop()
        self._last = loop.time()
        while True:
            await asyncio.sleep(self._tick)
            now = loop.time()
            self._held += max(0.0, now - self._last - self._tick)
            self._last = now


class HeldUp(TimeoutError):
    """The work did not end, and the loop was held up for as long again as the work was given: it never
    had its time, so this is no answer either way."""


async def in_own_time(work: Coroutine[Any, Any, T], seconds: float) -> T:
    """``work``'s result, given ``seconds`` of the loop's own time, not of the clock's.

    A wake-up at the deadline that comes late means the loop was held up
    (busy elsewhere, the process not scheduled) across it: a reply may be
    sitting unread in its socket. So the deadline moves on by that lateness,
    up to ``seconds`` more in all. ``TimeoutError`` when the work had its
    time; :class:`HeldUp` when the loop kept it from having it. The work is
    cancelled, and waited for, when it does not end in time.
    """
    loop = asyncio.get_running_loop()
    task = loop.create_task(work)
    punctual = min(0.01, seconds / 10)
    try:
        deadline = loop.time() + seconds
        extra = 0.0
        while True:
            done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - loop.time()))
            if done:
                return task.result()
            late = loop.time() - deadline
            if late <= punctual:
                raise TimeoutError
            if extra >= seconds:
                raise HeldUp
            grant = min(late, seconds - extra)
            extra += grant
            deadline = loop.time() + grant
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
