"""A prefill deployment's size is bounded (issue 41, item 6): one ``PUT /route`` saying ``attn_tp_size``
1,000,000 made ``GET /prefill`` build a list of a million ranks (8.5 s, the loop stalled); past
``MAX_RANKS`` ranks it is a ``400`` with nothing stored, and a listing names at most 1,024 missing ranks
without making the list of every rank."""

from __future__ import annotations

from typing import Any

import pytest

from aiobootstrap.wire.prefill import MAX_RANKS, Coords, Topology

from .helpers.prefill import ALL, rank_body


@pytest.mark.parametrize(
    ("sizes", "said"),
    [
        ({"tp_size": 1_000_000}, "dp 1 x cp 1 x tp 1000000 x pp 1 is 1000000 ranks"),
        ({"tp_size": 256, "dp_size": 257}, "dp 257 x cp 1 x tp 256 x pp 1 is 65792 ranks"),
        ({"tp_size": 10**40}, "dp 1 x cp 1 x tp over 10**18 x pp 1 is over 10**18 ranks"),
    ],
    ids=["a million", "just past", "past any integer"],
)
async def test_a_topology_past_the_limit_is_a_400_and_nothing_is_stored(
    client: Any, sizes: dict[str, int], said: str
) -> None:
    given: dict[str, Any] = {"dp_size": 1, **sizes}
    body = rank_body(0, 0, **given)
    reply = await client.put("/route", json=body)
    assert reply.status == 400
    assert (await reply.json())["detail"] == (
        f"The prefill topology {said}: at most {MAX_RANKS} in one deployment."
    )
    assert (await (await client.get("/prefill")).json())["topology"] is None


async def test_the_largest_topology_registers_and_lists_briefly(client: Any) -> None:
    """256 x 256 ranks, the limit: a rank registers; the listing names the first 1,024 missing ranks and
    counts them all; decode hears the 503 with the count."""
    assert MAX_RANKS == 256 * 256
    reply = await client.put("/route", json=rank_body(1, 0, tp_size=256, dp_size=256))
    assert reply.status == 200, await reply.text()
    listing = await (await client.get("/prefill")).json()
    assert (listing["expected"], listing["registered"], listing["missing_count"]) == (65_536, 1, 65_535)
    assert len(listing["missing"]) == 1024
    assert listing["missing"][:2] == ["dp0-cp0-tp0-pp0", "dp0-cp0-tp2-pp0"]
    assert (await client.get(f"/route?{ALL}")).status == 503


def test_the_missing_ranks_stop_at_the_most_asked() -> None:
    """Topology.missing reads the names present, and makes names only until it has the most asked."""
    topology = Topology(2, 1, 2, 1, 1, "auto", True)
    assert topology.missing({"dp0-cp0-tp0-pp0", "dp5-cp0-tp0-pp0"}, 2) == (
        ["dp0-cp0-tp1-pp0", "dp1-cp0-tp0-pp0"],
        3,
    )
    present = {Coords(dp, 0, tp, 0).name for dp in range(2) for tp in range(2)}
    assert topology.missing(present, 1024) == ([], 0)
