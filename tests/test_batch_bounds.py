"""A batch costs what exists, not what it names: rank sets as ranges, the cap, the compact 404."""

from __future__ import annotations

import asyncio
import gc
import random
import tracemalloc
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from aiobootstrap import BadRequest, BootstrapClient, RankNotRegistered, Registry, _json, create_app
from aiobootstrap._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap._ranks import RankSet
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.wire.bodies import session_id_of
from aiobootstrap.wire.errors import decode_not_registered, encode_not_registered
from aiobootstrap.wire.params import parse_ranks, split_rank_specs
from aiobootstrap.wire.routes import BATCH_QUERY_CHARS, MAX_BATCH_RANKS, MISSING_LIST_MAX

from .helpers.registry import info_key, open_registry, register_in
from .helpers.waits import GUARD, until

Client = TestClient[web.Request, web.Application]
ServerFactory = Callable[..., Awaitable[TestServer]]

BATCH = "/get_transfer_engine_info_batch"
CAP = MAX_BATCH_RANKS


# -- RankSet --------------------------------------------------------------


def test_a_spec_is_kept_as_ranges_not_expanded() -> None:
    """Parsing the largest range there is costs one range: length, membership and format without expanding."""
    ranks = RankSet.parse("0-999999999999999999")
    assert len(ranks) == 10**18
    assert ranks.ranges == ((0, 10**18 - 1),)
    assert 10**18 - 1 in ranks
    assert 10**18 not in ranks
    assert str(ranks) == "0-999999999999999999"


def test_a_spec_merges_overlaps_and_repeats_in_any_order() -> None:
    """Parts in any order, overlapping, adjacent or repeated make one sorted set of ranges."""
    ranks = RankSet.parse("10-11, 0-3,2,4,8,3")
    assert ranks.ranges == ((0, 4), (8, 8), (10, 11))
    assert list(ranks) == [0, 1, 2, 3, 4, 8, 10, 11]
    assert str(ranks) == "0-4,8,10-11"
    assert RankSet.parse(str(ranks)) == ranks


@pytest.mark.parametrize("seed", range(50))
def test_rank_set_operations_agree_with_python_sets(seed: int) -> None:
    """from_ranks, iteration, membership, without, chunks and head agree with a plain set."""
    rng = random.Random(seed)
    a = set(rng.sample(range(80), rng.randrange(0, 60)))
    b = set(rng.sample(range(80), rng.randrange(0, 60)))
    ranks = RankSet.from_ranks(a)
    assert list(ranks) == sorted(a)
    assert len(ranks) == len(a)
    assert [rank in ranks for rank in range(-1, 82)] == [rank in a for rank in range(-1, 82)]
    assert list(ranks.without(b)) == sorted(a - b)
    assert ranks.without(RankSet.from_ranks(b)) == RankSet.from_ranks(a - b)
    size = rng.randrange(1, 9)
    chunks = list(ranks.chunks(size))
    assert [rank for chunk in chunks for rank in chunk] == sorted(a)
    assert all(len(chunk) == size for chunk in chunks[:-1])
    assert ranks.head(5) == sorted(a)[:5]


@pytest.mark.parametrize(
    "spec", ["", "a", "3-1", "-1", "1,,2", "1-", "+1", " 1 2", "1.0", "1000000000000000000"]
)
def test_a_bad_spec_is_a_bad_request_naming_the_parameter(spec: str) -> None:
    """Anything that is not a rank or a range is refused, naming the parameter: a ValueError in the
    leaf, a BadRequest (400) on the wire."""
    with pytest.raises(ValueError, match="ranks"):
        RankSet.parse(spec)
    if spec.strip():
        with pytest.raises(BadRequest, match="ranks"):
            parse_ranks(spec)


def test_the_cap_counts_distinct_ranks() -> None:
    """A set of exactly the cap passes (repeats count once); one rank more is refused, naming the cap."""
    assert len(parse_ranks(f"0-{CAP - 1},0-{CAP - 1},5")) == CAP
    with pytest.raises(BadRequest) as caught:
        parse_ranks(f"0-{CAP}")
    assert str(CAP) in caught.value.detail
    with pytest.raises(BadRequest):
        parse_ranks("0-1048575")


def test_split_rank_specs_keeps_each_request_under_the_cap_and_the_line() -> None:
    """The client's split: every spec parses under the cap, fits one query, and together they cover every rank."""
    ranks = [*range(CAP * 2 + 10), *range(CAP * 3, CAP * 3 + 20000, 2)]
    specs = split_rank_specs(ranks)
    sets = [parse_ranks(spec) for spec in specs]
    assert all(len(spec) <= BATCH_QUERY_CHARS for spec in specs)
    assert all(len(ranks) <= CAP for ranks in sets)
    assert [rank for ranks in sets for rank in ranks] == ranks


# -- the 404 of a batch -----------------------------------------------------


def test_a_single_rank_404_is_as_before() -> None:
    """A get's or a delete's 404 names its rank in missing, and nothing more."""
    body = encode_not_registered([7])
    assert _json.loads(body) == {"detail": "No transfer engine info for rank 7", "missing": [7]}


def test_a_batch_404_is_bounded_and_reads_back_whole() -> None:
    """missing lists at most 1,024 ranks, missing_ranks names them all, and the client reads them all back."""
    missing = RankSet.parse("0-4095,5000,6000-6001")
    body = encode_not_registered(missing)
    reply = _json.loads(body)
    assert reply["missing"] == list(range(MISSING_LIST_MAX))
    assert reply["missing_truncated"] is True
    assert reply["missing_ranks"] == "0-4095,5000,6000-6001"
    assert reply["detail"] == "No transfer engine info for ranks 0-4095,5000,6000-6001"
    assert len(body) < 8 * 1024
    assert decode_not_registered(404, body) == list(missing)


def test_a_small_batch_404_lists_every_rank_untruncated() -> None:
    """Up to 1,024 missing ranks are all in missing, with no truncation flag."""
    reply = _json.loads(encode_not_registered(RankSet.parse("0-1023")))
    assert reply["missing"] == list(range(1024))
    assert "missing_truncated" not in reply
    assert reply["missing_ranks"] == "0-1023"


def test_the_detail_names_a_few_ranges_only() -> None:
    """A scattered missing set keeps the sentence short: twenty ranges, then a count of the rest."""
    missing = RankSet.from_ranks(range(0, 2 * CAP, 2))
    detail = _json.loads(encode_not_registered(missing))["detail"]
    assert detail.endswith(f"and {CAP - 20} more ranges")
    assert len(detail) < 200


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        (b'{"detail": "x", "missing": [1, 2], "missing_ranks": "1-2,9"}', [1, 2, 9]),
        (b'{"detail": "x", "missing": [1, 2], "missing_ranks": "junk"}', [1, 2]),
        (b'{"detail": "x", "missing_ranks": "0-99999999"}', None),
    ],
)
def test_the_client_reads_missing_ranks_first(body: bytes, missing: list[int] | None) -> None:
    """missing_ranks wins when readable (and within the cap); else missing is read as before."""
    assert decode_not_registered(404, body) == missing


# -- over HTTP ------------------------------------------------------------


async def test_a_million_rank_query_is_a_400_naming_the_cap(client: Client) -> None:
    """The query that used to build a 7 MB 404 is refused at once, in one sentence naming the cap."""
    async with client.get(BATCH, params={"ranks": "0-1048575", "wait": "60"}) as reply:
        assert reply.status == 400
        detail = (await reply.json())["detail"]
    assert f"at most {CAP}" in detail
    assert detail.count(".") == 1


async def test_a_capped_range_with_nothing_registered_is_a_small_404(
    client: Client, registry: Registry
) -> None:
    """65,536 ranks, none registered: a 404 of a few KB naming the whole set as one range."""
    async with client.get(BATCH, params={"ranks": f"0-{CAP - 1}"}) as reply:
        assert reply.status == 404
        body = await reply.read()
    assert len(body) < 8 * 1024
    reply_json = _json.loads(body)
    assert reply_json["missing_ranks"] == f"0-{CAP - 1}"
    assert reply_json["missing_truncated"] is True
    assert len(reply_json["missing"]) == MISSING_LIST_MAX


async def test_a_capped_batch_reports_exactly_what_is_missing(client: Client, registry: Registry) -> None:
    """With some ranks registered, missing_ranks is the rest of the set as ranges."""
    for rank in (0, 5, 6, 60000):
        await register_in(registry, rank)
    async with client.get(BATCH, params={"ranks": f"0-{CAP - 1}", "wait": "0.01"}) as reply:
        assert reply.status == 404
        body = await reply.json()
    assert body["missing_ranks"] == f"1-4,7-59999,60001-{CAP - 1}"
    assert body["missing"][:6] == [1, 2, 3, 4, 7, 8]


async def test_a_parked_capped_batch_holds_one_waitlist_and_answers_when_all_arrive(
    client: Client, registry: Registry
) -> None:
    """A wait on a large set parks on one rank at a time, and answers when the last arrives."""
    size = 1100  # past the read-by-key size, and several chunks of the walk
    task = asyncio.create_task(client.get(BATCH, params={"ranks": f"0-{size - 1}", "wait": "120"}))
    await until(lambda: registry.waiting_keys == 1)
    assert registry.parked == 1
    for rank in range(size - 1, 0, -1):
        await register_in(registry, rank)
    assert not task.done()
    await register_in(registry, 0)
    reply = await asyncio.wait_for(task, GUARD)
    assert reply.status == 200
    assert [item["rank"] for item in (await reply.json())["infos"]] == list(range(size))
    assert (registry.parked, registry.waiting_keys) == (0, 0)


async def test_a_large_set_wait_sees_a_rank_unregistered_meanwhile_as_missing() -> None:
    """A set over the read-by-key size that gets a rank back and then loses it again keeps waiting for it."""
    registry = await open_registry()
    ranks = RankSet.parse("0-1999")
    for rank in range(1, 2000):
        await register_in(registry, rank)
    waiter = asyncio.create_task(
        registry.wait_all("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE, ranks, timeout=GUARD)
    )
    await until(lambda: registry.parked == 1)
    assert await registry.unregister(info_key(1999)) is not None
    await register_in(registry, 0)
    await until(lambda: registry.is_waited(info_key(1999)))
    assert not waiter.done()
    await register_in(registry, 1999, "back")
    found, missing = await asyncio.wait_for(waiter, GUARD)
    assert not missing
    assert len(found) == 2000
    assert session_id_of(found[-1].value) == "back"


async def test_a_parked_capped_batch_holds_little_memory(client: Client, registry: Registry) -> None:
    """Parked waits on 65,536 unregistered ranks each hold a few KB, not tens of MB (a generous bound)."""
    waiters = 20
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tasks = [
            asyncio.create_task(client.get(BATCH, params={"ranks": f"0-{CAP - 1}", "wait": str(GUARD)}))
            for _ in range(waiters)
        ]
        await until(lambda: registry.parked == waiters)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    registry.close()
    for task in tasks:
        reply = await asyncio.wait_for(task, GUARD)
        reply.release()
    assert held / waiters < 256 * 1024, f"{held / waiters:.0f} bytes per parked batch"


async def test_get_many_names_every_missing_rank_past_the_listed_head(aiohttp_server: ServerFactory) -> None:
    """The client's get_many over thousands of missing ranks, and over more than one request's cap,
    raises RankNotRegistered naming each of them, not the 1,024 a 404 lists."""
    server = await aiohttp_server(create_app())
    registry = server.app[REGISTRY]
    await register_in(registry, 3)
    wanted = [*range(CAP + 5000), CAP * 4]
    async with BootstrapClient(str(server.make_url("/"))) as bootstrap:
        with pytest.raises(RankNotRegistered) as caught:
            await bootstrap.get_many(wanted, timeout=0)
    assert list(caught.value.ranks) == [rank for rank in wanted if rank != 3]


@pytest.mark.parametrize(
    ("spec", "ranks", "parts"),
    [
        ("0-9", [], []),
        ("0-9", [0, 5, 9, 10], [slice(0, 3)]),
        ("2-3,7,9-20", [0, 2, 3, 4, 7, 8, 12, 30], [slice(1, 3), slice(4, 5), slice(6, 7)]),
        ("100-200", [1, 2, 3], []),
    ],
)
def test_select_finds_the_slices_of_sorted_ranks_in_the_set(
    spec: str, ranks: list[int], parts: list[slice]
) -> None:
    """select answers, per range, the slice of ascending ranks inside it, without a membership test per rank."""
    assert RankSet.parse(spec).select(ranks) == parts
