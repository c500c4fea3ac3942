"""Stopping a shared store's background task: cancelled, and waited for a bounded time.

A feed's reader inside its client's reconnection to a server that died (a
Redis primary mid-failover, an etcd member killed) may not end at once when
cancelled; a server that stops must stop all the same. So a task is waited
for :data:`STOPPING` seconds at most, and the store goes on without it,
saying so. A cancellation of the caller still propagates.
"""

from __future__ import annotations

import asyncio
import logging

__all__ = ["STOPPING", "stop_task"]

logger = logging.getLogger("aiobootstrap")

STOPPING = 5.0
"""Seconds a cancelled task is waited for; past them the store closes without it (and says so)."""


async def stop_task(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` (if any) and wait for it to end, :data:`STOPPING` seconds at most."""
    if task is not None:
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=STOPPING)
        if not done:
            logger.warning(
                "%s did not stop within %g s of its cancellation; stopping without it",
                task.get_name(),
                STOPPING,
            )
