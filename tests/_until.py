"""Waiting for a condition the server reports, instead of sleeping for a guess."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

GUARD = 10.0
"""Seconds after which a condition that never holds fails the test (never reached when it passes)."""


async def until(condition: Callable[[], bool]) -> None:
    """Yield to the loop until ``condition`` holds, failing after :data:`GUARD` seconds."""
    async with asyncio.timeout(GUARD):
        while True:
            if condition():
                return
            await asyncio.sleep(0.005)
