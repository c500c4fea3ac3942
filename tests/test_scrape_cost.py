"""A scrape counts records at the cost of a count: it never fetches them (the Redis store, over HTTP)."""

from __future__ import annotations

from typing import Any

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.app import REGISTRY
from testbed.redis_server import RedisServer

from .helpers.registry import info_key

RANKS = 40
SIZE = 100_000
"""Each record's bytes: the table holds RANKS * SIZE, and a scrape must not move them."""


def _sent(redis_server: RedisServer) -> int:
    info = redis_server.command("INFO", "stats")
    assert isinstance(info, dict)
    return int(info["total_net_output_bytes"])


async def test_a_scrape_reads_no_record_of_a_redis_store(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """40 ranks of 100 KB: a scrape shows aiobootstrap_registered_ranks 40, and Redis sends it a few KB.

    Fails before issue 18: the scrape fetched (and decoded) every record to count them, 4 MB here.
    """
    client = await aiohttp_client(create_app(ServerConfig(store=redis_server.url)))
    store = client.app[REGISTRY].store
    for rank in range(RANKS):
        await store.put(info_key(rank), {"session_id": "s", "weights_info_dict": {"w": "x" * SIZE}})
    before = _sent(redis_server)
    reply = await client.get("/metrics")
    sent = _sent(redis_server) - before
    assert reply.status == 200
    assert f'aiobootstrap_registered_ranks{{namespace="default"}} {RANKS}.0' in await reply.text()
    assert sent < SIZE, f"Redis sent {sent} bytes for one scrape"
