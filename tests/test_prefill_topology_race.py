"""Two first prefill ranks of contradicting deployments at once: one is refused (issue 41, item 2).

The first rank to fix the topology writes it, then its own record: two writes. A rank that found the
topology taken by another deployment and no rank registered used to take it for a deployment that had left
and replace it; while the first rank's own write was still in flight (through another replica, or on a
loaded machine) both were 200, and the deployment mixed two page sizes. A rank write held back here makes
that moment last."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from aiobootstrap.core.registry import Registry
from aiobootstrap.server.appkeys import REGISTRY
from aiobootstrap.store import Key, Record
from aiobootstrap.wire.prefill import PREFILL_RANK

from .helpers.prefill import rank_body
from .helpers.waits import GUARD

HELD = 0.3
"""Seconds a prefill rank's own write is held back, after its deployment's topology is written."""


def _hold_rank_writes(client: Any) -> None:
    registry: Registry = client.app[REGISTRY]
    register = registry.register

    def held(key: Key, value: dict[str, Any], lease: str | None = None) -> Coroutine[Any, Any, Record]:
        async def later() -> Record:
            await asyncio.sleep(HELD)
            return await register(key, value, lease)

        return later() if key.kind == PREFILL_RANK else register(key, value, lease)

    registry.register = held  # type: ignore[method-assign]


@pytest.mark.parametrize("store_kind", ["memory", "redis", "etcd"], indirect=True)
async def test_a_contradicting_first_rank_while_the_first_ranks_write_is_in_flight_is_a_409(
    client: Any,
) -> None:
    """Page size 64 fixes the topology; page size 32 comes while 64's rank record is still being written:
    the 409, and the topology kept is 64's."""
    _hold_rank_writes(client)
    first = asyncio.create_task(client.put("/route", json=rank_body(0, 0, page_size=64)))
    # The topology is written (its change is on /watch); the first rank's own record is not yet.
    watched = await client.get(f"/watch?after=0&wait={GUARD}&kind=prefill_topology")
    assert [change["op"] for change in (await watched.json())["changes"]] == ["put"]
    second = await client.put("/route", json=rank_body(1, 0, page_size=32))
    assert (await asyncio.wait_for(first, GUARD)).status == 200
    assert second.status == 409, await second.text()
    listing = await (await client.get("/prefill")).json()
    assert (listing["topology"]["page_size"], listing["registered"]) == (64, 1)
