"""What registering a prefill topology costs in store reads: O(N) for N ranks, with decode waiting.

Readiness is a condition the core counts as ranks arrive (one read to seed it, shared by every decode
waiting on the deployment); it used to re-read the topology, the count and every rank's record at each
arrival (O(N^2) records read for N ranks registered in order)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any

import pytest

from aiobootstrap.server.appkeys import REGISTRY

from .helpers.prefill import ALL, rank_body
from .helpers.waits import GUARD, until

DP, TP = 32, 4
"""A topology of 128 ranks (dp x tp), registered in the topology's order."""

_READS = ("get", "get_many", "records", "records_in", "count")


def count_reads(store: Any) -> tuple[collections.Counter[str], list[int]]:
    """Count ``store``'s read calls (by name) and the records they returned, from now on."""
    calls: collections.Counter[str] = collections.Counter()
    records = [0]

    def counted(name: str, read: Callable[..., Any]) -> Callable[..., Any]:
        async def call(*args: Any) -> Any:
            calls[name] += 1
            found = await read(*args)
            records[0] += (
                len([r for r in found if r is not None]) if isinstance(found, list) else found is not None
            )
            return found

        return call

    for name in _READS:
        setattr(store, name, counted(name, getattr(store, name)))
    return calls, records


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_registering_n_ranks_with_decode_waiting_costs_o_n_reads(client: Any) -> None:
    """Ten decodes parked on GET /route (all four -1) while 128 ranks register one by one: a few reads per
    rank, and about one record read per rank, not a read of every rank at every arrival."""
    registry = client.app[REGISTRY]
    calls, records = count_reads(registry.store)
    n = DP * TP
    decodes = [asyncio.create_task(client.get(f"/route?{ALL}&wait=60")) for _ in range(10)]
    await until(lambda: registry.parked == 10)
    for dp in range(DP):
        for tp in range(TP):
            body = rank_body(tp, dp, tp_size=TP, dp_size=DP)
            assert (await client.put("/route", json=body)).status == 200
    replies = await asyncio.wait_for(asyncio.gather(*decodes), GUARD)
    assert [reply.status for reply in replies] == [200] * 10
    total = sum(calls.values())
    # Each registration reads the topology once; the waits add a few reads each, however many ranks.
    assert total <= n + 10 * 10, dict(calls)
    assert records[0] <= 2 * n, (records[0], dict(calls))
