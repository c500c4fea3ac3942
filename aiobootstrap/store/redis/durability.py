"""The warning a Redis store gives at open when its Redis can lose acknowledged writes.

A write is acknowledged once its script returns (and, with
``--store-min-replicas N``, once ``WAIT`` says N replicas hold it): what
Redis then keeps is Redis's business, set by its config. At open the store reads
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

__all__ = ["warn_if_lossy", "warn_if_unreplicated"]

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


async def warn_if_unreplicated(connection: Connection, min_replicas: int) -> None:
    """Log one warning when the deployment cannot keep ``--store-min-replicas``'s promise.

    The promise: no acknowledged write is lost by a failover. It needs
    ``min_replicas`` replicas connected (else every write is a 503), the
    primary's ``min-replicas-to-write`` (else a primary cut off from its
    replicas goes on applying the writes it refuses, and a failover drops
    them), and replicas that persist (else one restarted comes back empty).
    """
    if min_replicas < 1:
        return
    try:
        info = await connection.call(_replication)
        floor = await connection.call(partial(_config_get, name="min-replicas-to-write"))
    except StoreUnavailable as exc:
        logger.info("Cannot check the replicas of Redis at %s: %s", connection.where, exc.detail)
        return
    replicas = [value for name, value in info.items() if name.startswith("slave") and isinstance(value, dict)]
    online = [(str(r.get("ip")), int(r.get("port", 0))) for r in replicas if r.get("state") == "online"]
    risks = []
    if len(online) < min_replicas:
        risks.append(
            f"{len(online)} replicas are connected to it, fewer than {min_replicas}, so every write is "
            "refused with 503 until there are"
        )
    if int(text(next(iter(floor.values()), b"0")) or 0) < 1:
        risks.append(
            "min-replicas-to-write is 0, so a primary cut off from its replicas still applies "
            "the writes it refuses, and a failover loses them"
        )
    for host, port in online:
        try:
            appendonly = await connection.ask_node(host, port, partial(_config_get, name="appendonly"))
        except StoreUnavailable as exc:
            risks.append(f"the persistence of replica {host}:{port} cannot be checked ({exc.detail})")
            continue
        if text(next(iter(appendonly.values()), b"yes")) != "yes":
            risks.append(f"replica {host}:{port} has appendonly no, so a restart of it loses what it held")
    if risks:
        logger.warning(
            "Redis at %s cannot keep --store-min-replicas %d: %s (docs/scale-out.md has the settings).",
            connection.where,
            min_replicas,
            "; ".join(risks),
        )


async def _replication(client: aioredis.Redis) -> dict[str, Any]:
    reply: dict[str, Any] = await client.info("replication")
    return reply
