"""Rounds every interval, as a task that lives with the app: how a face probes what its records name
(the encoder URLs' ``/health``, Mooncake engines' RPC addresses), shared so that no face imports another."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

from ...core.registry import Registry
from ...exceptions import BootstrapError

__all__ = ["every", "running"]

log = logging.getLogger("aiobootstrap")


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
