"""The clients' prefill bootstrap calls (async and sync), against the real app: register prefill ranks,
wait for the parallel info and a rank's address, register rooms and wait for their dp ranks."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest

from aiobootstrap import (
    BootstrapClient,
    RankNotRegistered,
    ServerConfig,
    ServerUnavailable,
    SyncBootstrapClient,
    TooManyRanks,
    TopologyConflict,
)
from aiobootstrap.exceptions import NotRegistered

from .helpers.prefill import rank_body


@pytest.fixture
def url(client: Any) -> str:
    return str(client.make_url("")).rstrip("/")


async def test_register_and_wait_for_the_topology_and_an_address(url: str) -> None:
    async with BootstrapClient(url) as client:
        waiting = asyncio.create_task(client.prefill_parallel_info(timeout=60))
        for tp, dp in ((0, 0), (1, 0), (0, 1)):
            await client.register_prefill_rank(rank_body(tp, dp))
        address = asyncio.create_task(client.prefill_rank_address(1, 0, 1, 0, timeout=60))
        await asyncio.sleep(0)
        assert not waiting.done()
        await client.register_prefill_rank(rank_body(1, 1))
        info = await asyncio.wait_for(waiting, 30)
        assert (info["dp_size"], info["attn_tp_size"]) == (2, 2)
        assert await asyncio.wait_for(address, 30) == ("10.0.0.11", 17011)
        with pytest.raises(NotRegistered, match="dp_rank=5"):
            await client.prefill_rank_address(5, 0, 0, 0, timeout=0.2)
        with pytest.raises(TopologyConflict, match="attn_tp_size 2"):
            await client.register_prefill_rank(rank_body(0, 0, tp_size=4))


async def test_a_contradicting_rank_is_a_topology_conflict_not_a_rank_cap(url: str) -> None:
    """The 409 of a contradicting prefill rank comes back as TopologyConflict (its reply's code), never as
    TooManyRanks, the other 409 a registration meets; both with the server's sentence, raised at once."""
    async with BootstrapClient(url) as client:
        await client.register_prefill_rank(rank_body(0, 0))
        changes: list[dict[str, Any]] = [
            {"attn_tp_size": 4},
            {"page_size": 16},
            {"kv_cache_dtype": "fp8"},
            {"decode_allocation_policy": "prefill_complete"},  # SGLang 0.5.23's refusals (issue 40)
            {"dsv41_spec_layout": {"num_draft_tokens": 4}},
        ]
        for changed in changes:
            with pytest.raises(TopologyConflict, match=next(iter(changed))) as raised:
                await client.register_prefill_rank({**rank_body(1, 0), **changed}, timeout=None)
            assert not isinstance(raised.value, TooManyRanks)
            assert raised.value.status == 409


@pytest.mark.parametrize("config", [ServerConfig(max_ranks=1)])
async def test_the_rank_cap_on_the_route_stays_too_many_ranks(url: str) -> None:
    """A 409 without the code (the rank cap, counting the deployment's rank records) is still TooManyRanks."""
    async with BootstrapClient(url) as client:
        await client.register_prefill_rank(rank_body(0, 0))
        with pytest.raises(TooManyRanks) as raised:
            await client.register_prefill_rank(rank_body(1, 0))
        assert not isinstance(raised.value, TopologyConflict)


async def test_an_incomplete_deployment_at_the_deadline_is_not_registered_naming_the_missing(
    url: str,
) -> None:
    """Both waits of an incomplete deployment end as a get of a missing rank does (issue 41 item 15): a
    RankNotRegistered (a NotRegistered and a TimeoutError, never ServerUnavailable, which is left to a server
    that does not answer) with the server's sentence and the missing ranks by name."""
    async with BootstrapClient(url) as client:
        await client.register_prefill_rank(rank_body(0, 0))
        for call in (client.prefill_parallel_info, partial(client.prefill_rank_address, 0, 0, 0, 0)):
            with pytest.raises(RankNotRegistered) as raised:
                await call(timeout=0.3)
            assert not isinstance(raised.value, ServerUnavailable)
            assert isinstance(raised.value, TimeoutError)
            assert raised.value.detail == (
                "Prefill server not fully registered yet (1 workers registered). "
                "Missing 3 of 4 prefill ranks: dp0-cp0-tp1-pp0, dp1-cp0-tp0-pp0, dp1-cp0-tp1-pp0."
            )


async def test_a_server_that_does_not_answer_stays_server_unavailable() -> None:
    """Nothing listening: the prefill waits' ServerUnavailable, not a not-registered error."""
    async with BootstrapClient("http://127.0.0.1:9") as client:  # the discard port: nothing listens there
        with pytest.raises(ServerUnavailable) as raised:
            await client.prefill_parallel_info(timeout=0.3)
        assert not isinstance(raised.value, NotRegistered)


async def test_rooms_through_the_sync_client(url: str) -> None:
    def blocking() -> tuple[dict[int, int], dict[int, int]]:
        with SyncBootstrapClient(url) as client:
            client.register_dp_rank(12345, 1)
            return client.query_dp_ranks([12345, 999]), client.query_dp_ranks([12345, 999], wait=0.2)

    assert await asyncio.to_thread(blocking) == ({12345: 1}, {12345: 1})
