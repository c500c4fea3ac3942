"""The warning a Redis store gives at open when its Redis can lose acknowledged writes.

A write is acknowledged once its script returns: what Redis then keeps is
Redis's business, set by its config. At open the store reads
``appendonly``, ``appendfsync`` and ``maxmemory-policy`` and logs one
warning naming each setting that can lose a registration (docs/scale-out.md
has the settings that keep them). A Redis that refuses ``CONFIG`` (managed
services do) gets an info line, not an error: the store works all the same.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from ...exceptions import StoreUnavailable
from .connection import Connection
from .keys import text

if TYPE_CHECKING:
    import redis.asyncio as aioredis

__all__ = ["warn_if_lossy"]

logger = logging.getLogger("aiobootstrap")

_SETTINGS = ("appendonly", "appendfsync", "maxmemory-policy")


async def warn_if_lossy(connection: Connection) -> None:
    """Log one warning when Redis's settings can lose acknowledged writes."""
    settings: dict[str, str] = {}
    try:
        for name in _SETTINGS:
            reply = await connection.call(partial(_config_get, name=name))
            settings.update((text(k), text(v)) for k, v in reply.items())
    except StoreUnavailable as exc:
        logger.info("Cannot check how durable Redis at %s is: %s", connection.where, exc.detail)
        return
    risks = []
    if settings.get("appendonly", "yes") != "yes":
        risks.append("appendonly is no, so a restart of Redis loses every registration")
    elif settings.get("appendfsync", "always") != "always":
        risks.append(
            f"appendfsync is {settings['appendfsync']}, so a crash of its machine loses "
            "the last acknowledged registrations"
        )
    policy = settings.get("maxmemory-policy", "noeviction")
    if policy.startswith("allkeys-"):
        risks.append(f"maxmemory-policy is {policy}, so a full Redis evicts registrations")
    if risks:
        logger.warning(
            "Redis at %s can lose acknowledged writes: %s (docs/scale-out.md has the settings that keep them).",
            connection.where,
            "; ".join(risks),
        )


async def _config_get(client: aioredis.Redis, name: str) -> dict[Any, Any]:
    reply: dict[Any, Any] = await client.config_get(name)
    return reply
