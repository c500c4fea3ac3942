"""``GET /query?wait=S&tp_size=N[&pp_size=K][&dp_size=M][&after=V]``: decode (or a proxy) learns a whole
deployment, never a partial one that gives it the wrong TP size; at the deadline a ``503`` names what is
missing. The wait is a core condition: the workers are not read again at each arrival."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from aiobootstrap._names import DEFAULT_ROLE
from aiobootstrap.server.appkeys import REGISTRY
from aiobootstrap.server.faces.vllm.readiness import QueryReady
from aiobootstrap.store import Change, Key
from aiobootstrap.wire.vllm import VLLM_WORKER, Readiness, Worker

from .helpers.waits import GUARD, parked_get


def worker(dp: int = 0, tp: int = 0, pp: int = 0, engine: str = "e") -> dict[str, Any]:
    return {"engine_id": engine, "dp_rank": dp, "tp_rank": tp, "pp_rank": pp, "addr": f"tcp://h:{1000 + tp}"}


async def register(client: Any, **ranks: Any) -> None:
    assert (await client.post("/register", json=worker(**ranks))).status == 200


async def test_a_wait_answers_once_every_dp_rank_has_its_tp_ranks(client: Any) -> None:
    waiting = await parked_get(client, f"/query?wait={GUARD}&tp_size=2&dp_size=2")
    await register(client, dp=0, tp=0)
    await register(client, dp=0, tp=1)
    await register(client, dp=1, tp=1)
    await asyncio.sleep(0)
    assert not waiting.done()
    await register(client, dp=1, tp=0)
    reply = await asyncio.wait_for(waiting, GUARD)
    assert reply.status == 200
    got = json.loads(await reply.read())
    assert [len(got[dp]["worker_addr"]) for dp in ("0", "1")] == [2, 2]
    assert int(reply.headers["X-Aiobootstrap-Version"]) >= 6  # two claims and four workers


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_pp_ranks_count_and_one_dp_rank_is_the_default(client: Any) -> None:
    waiting = await parked_get(client, f"/query?wait={GUARD}&tp_size=1&pp_size=2")
    await register(client, pp=0)
    await register(client, pp=0)  # the same worker twice counts once
    await register(client, tp=3)  # outside the sizes waited for: counts for nothing
    await register(client, pp=1)
    reply = await asyncio.wait_for(waiting, GUARD)
    assert json.loads(await reply.read())["0"]["worker_addr"]["0"] == {
        "0": "tcp://h:1000",
        "1": "tcp://h:1000",
    }


async def test_at_the_deadline_a_503_names_what_is_missing(client: Any) -> None:
    empty = await client.get("/query?tp_size=1")
    assert empty.status == 503
    assert await empty.json() == {
        "detail": "The vLLM deployment is not complete: 0 of 1 dp rank registered (each of tp_size=1, pp_size=1).",
        "registered": 0,
    }
    await register(client, dp=0, tp=0)
    late = await client.get("/query?wait=0.05&tp_size=2")
    assert late.status == 503
    assert late.content_type == "application/json"
    assert "X-Aiobootstrap-Version" in late.headers
    assert await late.json() == {
        "detail": "The vLLM deployment is not complete: dp_rank=0 lacks tp_rank=1 pp_rank=0.",
        "registered": 1,
    }
    assert (await client.get("/query?tp_size=1")).status == 200


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_dp_size_alone_counts_the_dp_ranks(client: Any) -> None:
    waiting = await parked_get(client, f"/query?wait={GUARD}&dp_size=2")
    await register(client, dp=0, tp=3)
    await register(client, dp=1, tp=0)
    reply = await asyncio.wait_for(waiting, GUARD)
    assert sorted(json.loads(await reply.read())) == ["0", "1"]


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_after_waits_for_a_change_of_the_workers(client: Any) -> None:
    await register(client, tp=0)
    first = await client.get("/query")
    version = first.headers["X-Aiobootstrap-Version"]
    waiting = await parked_get(client, f"/query?wait={GUARD}&after={version}")
    await register(client, tp=1)
    reply = await asyncio.wait_for(waiting, GUARD)
    assert list(json.loads(await reply.read())["0"]["worker_addr"]) == ["0", "1"]
    assert int(reply.headers["X-Aiobootstrap-Version"]) > int(version)
    plain = await client.get("/query?wait=30")  # wait alone waits for nothing: vLLM's query, at once
    assert plain.status == 200


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
@pytest.mark.parametrize(
    "params",
    ["tp_size=0", "tp_size=x", "tp_size=1&tp_size=2", "tp_size=1&wait=-1", "dp_size=10000000"],
)
async def test_a_malformed_parameter_is_a_400(client: Any, params: str) -> None:
    reply = await client.get(f"/query?{params}")
    assert reply.status == 400
    assert (await reply.json())["detail"]


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_the_workers_are_not_read_again_per_arrival(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = client.app[REGISTRY].store  # the registry's reads and the condition's seed both come here
    reads: list[str] = []
    records = store.records

    def counted(namespace: str, kind: str, role: str) -> Any:
        reads.append(kind)
        return records(namespace, kind, role)

    monkeypatch.setattr(store, "records", counted)
    waiting = await parked_get(client, f"/query?wait={GUARD}&tp_size=16")
    for tp in range(16):
        await register(client, tp=tp)
    assert (await asyncio.wait_for(waiting, GUARD)).status == 200
    assert (
        reads.count("vllm_worker") <= 3
    )  # the seed, the reply's read (a resync's aside), never one per worker


_SIZES = st.tuples(st.integers(1, 3), st.integers(1, 2), st.integers(1, 3))
_STEPS = st.lists(
    st.tuples(st.booleans(), st.integers(0, 3), st.integers(0, 3), st.integers(0, 2)), max_size=40
)


@settings(max_examples=80, deadline=None)
@given(sizes=_SIZES, steps=_STEPS, tp_given=st.booleans())
def test_the_condition_kept_change_by_change_agrees_with_a_reading_of_every_worker(
    sizes: tuple[int, int, int], steps: list[tuple[bool, int, int, int]], tp_given: bool
) -> None:
    """The condition counts as workers come and go; at each step it says what reading every worker says."""
    tp_size, pp_size, dp_size = sizes
    readiness = Readiness(tp_size if tp_given else None, pp_size, dp_size)
    condition = QueryReady("ns", readiness, 0)
    condition.seed([])
    present: dict[Key, Worker] = {}
    for version, (put, dp, tp, pp) in enumerate(steps, start=1):
        held = Worker("e", dp, tp, pp, "tcp://h:1")
        key = Key.named("ns", VLLM_WORKER, DEFAULT_ROLE, held.name)
        if put:
            present[key] = held
            condition.changed(Change(key, version, None))
        else:
            present.pop(key, None)
            condition.changed(Change(key, version, None, deleted=True))
        assert condition.met == (readiness.missing(present.values()) is None)
