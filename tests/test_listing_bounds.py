"""A listing costs what is registered, not the world size: the missing ranks as ranges, the list capped."""

from __future__ import annotations

import argparse
import io

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from aiobootstrap import BootstrapClient, ServerConfig, _json
from aiobootstrap._ranks import RankSet
from aiobootstrap.cli.tool_parser import add_tool_parsers
from aiobootstrap.cli.tools import run_tool
from aiobootstrap.wire.results import decode_listing
from aiobootstrap.wire.routes import MISSING_LIST_MAX

from .helpers.registry import registration

Client = TestClient[web.Request, web.Application]

HUGE = 10**12
WIDE = 3000
"""More than MISSING_LIST_MAX ranks missing, few enough to compare with a plain list."""


async def register(client: Client, *ranks: int) -> None:
    for rank in ranks:
        async with client.put("/register_transfer_engine_info", json=registration(rank)) as reply:
            assert reply.status == 200, await reply.text()


@pytest.mark.parametrize("config", [ServerConfig(world_size=HUGE)])
async def test_a_listing_of_a_huge_world_is_a_small_reply(client: Client) -> None:
    """With --world-size 10**12 the listing names the missing ranks as ranges in a reply of a few KB."""
    await register(client, 5, 9)
    async with client.get("/ranks") as reply:
        assert reply.status == 200
        body = await reply.read()
    assert len(body) < 16 * 1024
    listing = _json.loads(body)
    assert listing["missing_ranks"] == f"0-4,6-8,10-{HUGE - 1}"
    assert listing["missing_truncated"] is True
    assert len(listing["missing"]) == MISSING_LIST_MAX
    assert listing["missing"][:10] == [0, 1, 2, 3, 4, 6, 7, 8, 10, 11]


@pytest.mark.parametrize("config", [ServerConfig(world_size=WIDE)])
async def test_the_listing_and_its_decoding_stay_exact_past_the_list_cap(client: Client) -> None:
    """Past 1,024 missing ranks, missing is the first 1,024 and missing_ranks, read by the client, all of them."""
    registered = {0, 7, 1500, WIDE - 1}
    await register(client, *registered)
    expected = [rank for rank in range(WIDE) if rank not in registered]
    async with client.get("/ranks") as reply:
        listing = _json.loads(await reply.read())
    assert listing["missing"] == expected[:MISSING_LIST_MAX]
    assert listing["missing_truncated"] is True
    assert list(RankSet.parse(listing["missing_ranks"])) == expected
    async with BootstrapClient(str(client.make_url("/"))) as bootstrap:
        decoded = await bootstrap.list_ranks()
    assert decoded.missing_ranks is not None
    assert list(decoded.missing_ranks) == expected
    assert decoded.missing == expected[:MISSING_LIST_MAX]


@pytest.mark.parametrize("config", [ServerConfig(world_size=4)])
async def test_a_small_listing_names_every_missing_rank_untruncated(client: Client) -> None:
    """Under the cap, missing lists them all, missing_ranks says the same, and nothing says truncated."""
    await register(client, 0, 2)
    async with client.get("/ranks") as reply:
        listing = _json.loads(await reply.read())
    assert (listing["missing"], listing["missing_ranks"]) == ([1, 3], "1,3")
    assert "missing_truncated" not in listing
    await register(client, 1, 3)
    async with client.get("/ranks") as reply:
        listing = _json.loads(await reply.read())
    assert (listing["missing"], listing["missing_ranks"]) == ([], "")


async def test_without_a_world_size_nothing_is_missing(client: Client) -> None:
    """No --world-size: missing and missing_ranks are null, and the client reads them as None."""
    await register(client, 3)
    async with BootstrapClient(str(client.make_url("/"))) as bootstrap:
        listing = await bootstrap.list_ranks()
    assert (listing.missing, listing.missing_ranks) == (None, None)


def test_a_listing_from_an_older_server_reads_its_missing_list() -> None:
    """A listing without missing_ranks (an older server listed every missing rank) still gives the set."""
    body = _json.dumps({"version": 1, "world_size": 4, "ranks": [], "missing": [0, 1, 3]})
    assert str(decode_listing(body).missing_ranks) == "0-1,3"


async def status(client: Client) -> str:
    parser = argparse.ArgumentParser()
    add_tool_parsers(parser)
    args = parser.parse_args(["status", "--url", str(client.make_url("/")), "--kind", "transfer_engine_info"])
    out, err = io.StringIO(), io.StringIO()
    # Exit status 1: ranks of the world size are missing (status is scriptable).
    assert await run_tool(args, token=None, out=out, err=err) == 1, err.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("config", [ServerConfig(world_size=HUGE)])
async def test_status_names_the_missing_ranks_of_a_huge_world_as_ranges(client: Client) -> None:
    """status over a world of 10**12 ranks prints the missing ones as ranges, read from the listing."""
    await register(client, 5, 9)
    assert f"  missing: 0-4,6-8,10-{HUGE - 1}\n" in await status(client)


@pytest.mark.parametrize("config", [ServerConfig(world_size=WIDE)])
async def test_status_names_more_than_the_list_cap_as_ranges(client: Client) -> None:
    """status with more than 1,024 ranks missing names every one of them, as ranges."""
    await register(client, 7, 1500)
    assert f"  missing: 0-6,8-1499,1501-{WIDE - 1}\n" in await status(client)
