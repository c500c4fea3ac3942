"""Waiting for a condition instead of sleeping, within a guard."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiobootstrap.server.app import REGISTRY

GUARD = 10.0
"""Seconds any awaited event may take before a test fails: generous, never a measurement."""


async def until(predicate: Callable[[], bool], guard: float = GUARD) -> None:
    """Yield to the loop until ``predicate()`` holds (fail after ``guard`` seconds)."""
    async with asyncio.timeout(guard):
        # Polls a condition the code under test exposes, with no delay: the
        # loop runs the other tasks at every turn. (An Event would need a hook
        # in the code under test for each condition.)
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0)


async def parked_get(client: Any, path: str) -> asyncio.Task[Any]:
    """``GET path`` through a test client, once the server has parked it (its registry counts one more wait)."""
    registry = client.app[REGISTRY]
    before = registry.parked
    waiting = asyncio.create_task(client.get(path))
    await until(lambda: registry.parked == before + 1)
    return waiting
