"""Restarts vLLM's own server refuses, which aiobootstrap lets back in: a worker restarted at a new address
replaces its old one (a WARNING naming both); an engine relaunched under a new engine_id takes its dp rank
over when no worker of its predecessor answers, and is vLLM's mismatch while one does (a real ZMQ ROUTER,
as vLLM's side channel is); a dp rank whose last worker left is gone from /query
and free for another engine. Leases and /watch see each of it."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from aiobootstrap.server.appkeys import REGISTRY
from aiobootstrap.server.faces.vllm.workers import claim_key
from testbed.redis_server import free_port

from .helpers.side_channel import router


@contextlib.contextmanager
def side_channel() -> Iterator[str]:
    """A live worker's side channel: a ZMQ ROUTER bound to a port, as vLLM's worker binds one; its addr."""
    with router() as (addr, _):
        yield addr


def worker(engine: str, addr: str, dp: int = 0, tp: int = 0) -> dict[str, Any]:
    return {"engine_id": engine, "dp_rank": dp, "tp_rank": tp, "pp_rank": 0, "addr": addr}


def dead() -> str:
    return f"tcp://127.0.0.1:{free_port()}"


async def query(client: Any) -> dict[str, Any]:
    reply = await client.get("/query")
    assert reply.status == 200
    result: dict[str, Any] = json.loads(await reply.read())
    return result


async def test_a_worker_at_a_new_address_replaces_its_old_one(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    old, new = dead(), dead()
    assert (await client.post("/register", json=worker("e", old))).status == 200
    unchanged = await client.post("/register", json=worker("e", old))  # the same again: nothing changes
    assert unchanged.status == 200
    assert [c["version"] for c in (await (await client.get("/watch?after=0")).json())["changes"]] == [1, 2]
    with caplog.at_level(logging.WARNING, "aiobootstrap"):
        assert (await client.post("/register", json=worker("e", new))).status == 200
    assert (await query(client))["0"]["worker_addr"] == {"0": {"0": new}}
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(old in line and new in line and "dp_rank=0 tp_rank=0 pp_rank=0" in line for line in warned)
    changes = (await (await client.get("/watch?after=2&kind=vllm_worker")).json())["changes"]
    assert changes == [
        {
            "op": "put",
            "kind": "vllm_worker",
            "key": "dp0-tp0-pp0",
            "dp_rank": 0,
            "tp_rank": 0,
            "pp_rank": 0,
            "version": 3,
        }
    ]


async def test_a_relaunched_engine_is_refused_while_its_predecessor_lives_and_takes_over_once_it_died(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with side_channel() as live:
        for tp, addr in ((0, live), (1, dead())):
            assert (await client.post("/register", json=worker("old-uuid", addr, tp=tp))).status == 200
        assert (await client.post("/register", json=worker("old-uuid", dead(), dp=1))).status == 200
        refused = await client.post("/register", json=worker("new-uuid", dead()))
        assert refused.status == 400
        assert (await refused.json())[
            "detail"
        ] == "Engine ID mismatch for dp_rank=0: expected old-uuid, got new-uuid"
    # The old engine's last live worker stopped: the relaunched engine takes dp rank 0 over, whole.
    with side_channel() as fresh:
        with caplog.at_level(logging.WARNING, "aiobootstrap"):
            assert (await client.post("/register", json=worker("new-uuid", fresh))).status == 200
        assert any("takes dp_rank=0 over from engine old-uuid" in r.getMessage() for r in caplog.records)
        after = await query(client)
        assert after["0"] == {
            "engine_id": "new-uuid",
            "worker_addr": {"0": {"0": fresh}},
        }  # its tp 1 went too
        assert after["1"]["engine_id"] == "old-uuid"  # another dp rank of the old engine is left alone
        back = await client.post("/register", json=worker("old-uuid", dead()))  # now the other one
        assert back.status == 400
    deleted = [
        c["key"]
        for c in (await (await client.get("/watch?after=0")).json())["changes"]
        if c["op"] == "delete"
    ]
    assert sorted(deleted) == ["dp0-tp0-pp0", "dp0-tp1-pp0"]


async def test_a_dp_rank_whose_last_worker_left_is_gone_and_free(client: Any) -> None:
    lease = (await (await client.post("/leases", json={"ttl": 60})).json())["lease"]
    with side_channel() as live:
        on_lease = {"X-Aiobootstrap-Lease": lease}
        assert (
            await client.post("/register", json=worker("a", dead(), dp=0), headers=on_lease)
        ).status == 200
        assert (await client.post("/register", json=worker("b", live, dp=1))).status == 200
        held = await (await client.get(f"/leases/{lease}")).json()
        assert len(held["records"]) == 1
        assert (await client.delete(f"/leases/{lease}")).status == 200
        assert list(await query(client)) == ["1"]  # dp rank 0 left with its last worker
        # Its claim went with it: another engine registers dp rank 0 at once.
        assert (await client.post("/register", json=worker("c", dead(), dp=0))).status == 200
        assert (await query(client))["0"]["engine_id"] == "c"


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_a_claim_whose_first_worker_answers_is_held_while_it_registers(client: Any) -> None:
    """The claim and the first worker's record are two writes: another engine reading between them finds
    a claim without workers, and it is held while the claiming worker answers."""
    with side_channel() as live:
        registry = client.app[REGISTRY]
        await registry.register(claim_key("default", 0), {"engine_id": "first", "addr": live})
        refused = await client.post("/register", json=worker("second", dead()))
        assert refused.status == 400
    assert (await client.post("/register", json=worker("second", dead()))).status == 200
