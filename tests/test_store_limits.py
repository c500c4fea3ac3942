"""The limits that need counts hold exactly under concurrency, over HTTP, on every local store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.app import REGISTRY

from .helpers.registry import registration, stored_count


@pytest.fixture(params=["memory", "file"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory:" if request.param == "memory" else f"file:{tmp_path / 'state.journal'}"


async def _put_all(client: TestClient[Any, Any], bodies: list[dict[str, Any]], concurrency: int) -> list[int]:
    gate = asyncio.Semaphore(concurrency)

    async def put(body: dict[str, Any]) -> int:
        async with gate:
            reply = await client.put("/register_transfer_engine_info", json=body)
            await reply.read()
            return reply.status

    return await asyncio.gather(*(put(body) for body in bodies))


@pytest.mark.parametrize("concurrency", [64, 512])
async def test_max_ranks_is_exact_under_concurrent_new_ranks(
    aiohttp_client: Any, store_url: str, concurrency: int
) -> None:
    """With --max-ranks 100, 2,000 distinct ranks registered at once store exactly 100; the rest get 409."""
    client = await aiohttp_client(create_app(ServerConfig(max_ranks=100, store=store_url)))
    statuses = await _put_all(client, [registration(rank) for rank in range(2000)], concurrency)
    assert statuses.count(200) == 100
    assert statuses.count(409) == 1900
    assert await stored_count(client.app[REGISTRY]) == 100


async def test_max_namespaces_is_exact_under_concurrent_new_namespaces(
    aiohttp_client: Any, store_url: str
) -> None:
    """With --max-namespaces 5, registrations in 50 new namespaces at once make exactly 5."""
    client = await aiohttp_client(create_app(ServerConfig(max_namespaces=5, store=store_url)))

    async def put(name: str) -> int:
        reply = await client.put(f"/ns/{name}/register_transfer_engine_info", json=registration(0))
        await reply.read()
        status: int = reply.status
        return status

    statuses = await asyncio.gather(*(put(f"n{i}") for i in range(50)))
    assert statuses.count(200) == 5
    assert statuses.count(503) == 45
    assert len(await client.app[REGISTRY].store.namespaces()) == 5
