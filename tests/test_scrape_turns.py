"""A scrape of many namespaces lets the loop turn: a probe beside it is answered before it ends.

A local store answers the scrape's reads without yielding, and the Prometheus text of thousands of
namespaces is megabytes: read in one go and written on the loop, a scrape held up every request
beside it (issue 30, F4: 1,000 namespaces of 32 ranks, /health 0.8-1.15 s during a scrape;
15,000 namespaces of parked waits, a 43-50 s scrape).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.app import REGISTRY

from .helpers.registry import info_key
from .helpers.waits import GUARD

NAMESPACES = 3000


async def test_a_probe_beside_a_scrape_of_thousands_of_namespaces_is_answered_first(
    aiohttp_client: Any,
) -> None:
    """3,000 namespaces, each with a rank: /health asked just after /metrics comes back while the scrape
    is still under way, and the scrape then shows every namespace."""
    client = await aiohttp_client(create_app(ServerConfig(max_namespaces=NAMESPACES + 1)))
    registry = client.app[REGISTRY]
    for number in range(NAMESPACES):
        await registry.register(info_key(0, f"team-{number}"), {"session_id": "s", "weights_info_dict": {}})
    scrape = asyncio.create_task(client.get("/metrics"))
    await asyncio.sleep(0)  # the scrape's request is on its way first
    async with asyncio.timeout(GUARD):
        health = await client.get("/health")
    assert health.status == 200
    assert not scrape.done()
    reply = await asyncio.wait_for(scrape, GUARD)
    text = await reply.text()
    assert text.count("aiobootstrap_registered_ranks{") == NAMESPACES
