"""/metrics per namespace, kind and role: world size, registered, missing, and the oldest parked wait."""

from __future__ import annotations

import asyncio
from typing import Any

from pytest_aiohttp import AiohttpClient

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.app import REGISTRY

from .helpers.metrics import register, scrape, value
from .helpers.prefill import rank_body
from .helpers.waits import until


async def test_missing_ranks_and_the_oldest_wait_are_one_alert_rule(aiohttp_client: AiohttpClient) -> None:
    """World size 4, ranks 0 and 1 in, a get parked on rank 3 of role draft: each figure by kind and role."""
    client = await aiohttp_client(create_app(ServerConfig(world_size=4)))
    await register(client, 0)
    await register(client, 1)
    waiting = asyncio.create_task(client.get("/get_transfer_engine_info?rank=3&role=draft&wait=30"))
    registry = client.app[REGISTRY]
    await until(lambda: registry.parked == 1)
    samples = await scrape(client)
    target = {"namespace": "default", "kind": "transfer_engine_info", "role": "target"}
    draft = {**target, "role": "draft"}
    config = {**target, "kind": "parallelism_config"}
    assert value(samples, "aiobootstrap_world_size", **target) == 4
    assert value(samples, "aiobootstrap_kind_registered_ranks", **target) == 2
    assert value(samples, "aiobootstrap_missing_ranks", **target) == 2
    assert value(samples, "aiobootstrap_missing_ranks", **config) == 4
    assert value(samples, "aiobootstrap_missing_ranks", **draft) == 4  # a role with a get parked is shown
    assert value(samples, "aiobootstrap_oldest_wait_seconds", **draft) > 0
    assert value(samples, "aiobootstrap_oldest_wait_seconds", **target) == 0
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)


async def test_without_a_world_size_only_what_is_registered(aiohttp_client: AiohttpClient) -> None:
    """No --world-size: registered ranks by kind and role, no world size and no missing series."""
    client = await aiohttp_client(create_app())
    await register(client, 5)
    samples = await scrape(client)
    target = {"namespace": "default", "kind": "transfer_engine_info", "role": "target"}
    assert value(samples, "aiobootstrap_kind_registered_ranks", **target) == 1
    assert not [
        name for name, _ in samples if name in ("aiobootstrap_world_size", "aiobootstrap_missing_ranks")
    ]


async def test_a_prefill_deployment_and_mooncake_keys_are_figures(client: Any) -> None:
    """A prefill deployment's ranks, with its topology's product of sizes as the world size (so the missing-ranks
    alert covers it), and a namespace's Mooncake keys, counted."""
    for tp, dp in ((0, 0), (1, 0), (0, 1)):
        assert (await client.put("/ns/pd/route", json=rank_body(tp, dp))).status == 200
    assert (await client.put("/ns/pd/metadata?key=mooncake/ram/a", data=b"{}")).status == 200
    samples = await scrape(client)
    where = {"namespace": "pd", "kind": "prefill_rank", "role": "target"}
    assert value(samples, "aiobootstrap_kind_registered_ranks", **where) == 3
    assert value(samples, "aiobootstrap_world_size", **where) == 4
    assert value(samples, "aiobootstrap_missing_ranks", **where) == 1
    keys = {"namespace": "pd", "kind": "metadata", "role": "target"}
    assert value(samples, "aiobootstrap_kind_registered_ranks", **keys) == 1
