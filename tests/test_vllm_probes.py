"""Dead vLLM workers leave: with ``--vllm-probe-interval`` every worker's side channel is connected to;
after 3 failures in a row its record is deleted (not before, and not when it registered again meanwhile),
while a live worker (a real ZMQ ROUTER, as vLLM binds one) is left alone and is sent nothing to log."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.appkeys import REGISTRY
from aiobootstrap.server.faces.vllm.probes import VLLM_PROBES, VllmProbes
from aiobootstrap.server.faces.vllm.settings import VllmSettings
from aiobootstrap.server.faces.vllm.workers import tcp_address
from testbed.redis_server import free_port

from .helpers.side_channel import router
from .helpers.waits import GUARD


def worker(addr: str, tp: int = 0) -> dict[str, Any]:
    return {"engine_id": "e", "dp_rank": 0, "tp_rank": tp, "pp_rank": 0, "addr": addr}


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_three_failed_rounds_forget_a_dead_worker_and_leave_the_live_one(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    dead = f"tcp://127.0.0.1:{free_port()}"
    with router() as (live, untouched):
        assert (await client.post("/register", json=worker(live, tp=0))).status == 200
        assert (await client.post("/register", json=worker(dead, tp=1))).status == 200
        probes = VllmProbes(client.app[REGISTRY], timeout=1.0)
        with caplog.at_level(logging.INFO, "aiobootstrap"):
            await probes.round()
            await probes.round()
            again = f"tcp://127.0.0.1:{free_port()}"
            assert (await client.post("/register", json=worker(again, tp=1))).status == 200  # counting anew
            await probes.round()
            await probes.round()
            assert len((await (await client.get("/query")).json())["0"]["worker_addr"]) == 2
            await probes.round()
        assert untouched()
    assert (await (await client.get("/query")).json())["0"]["worker_addr"] == {"0": {"0": live}}
    forgot = [r.getMessage() for r in caplog.records if "forgot" in r.getMessage()]
    assert forgot == [f"forgot vLLM worker dp0-tp1-pp0 at {again} after 3 failed connects"]


async def test_probing_on_deletes_a_dead_worker_and_the_listing_shows_it(aiohttp_client: Any) -> None:
    settings = VllmSettings(vllm_probe_interval=0.02, vllm_probe_timeout=1.0)
    app = create_app(dataclasses.replace(ServerConfig(), settings=(settings,)))
    client = await aiohttp_client(app)
    assert VLLM_PROBES in app
    with router() as (live, untouched):
        assert (await client.post("/register", json=worker(live, tp=0))).status == 200
        registered = await client.post("/register", json=worker(f"tcp://127.0.0.1:{free_port()}", tp=1))
        assert registered.status == 200
        version = (await client.get("/query")).headers["X-Aiobootstrap-Version"]
        changed = await client.get(f"/watch?after={version}&wait={GUARD}&kind=vllm_worker")
        assert (await changed.json())["changes"][0]["op"] == "delete"
        listing = await (await client.get("/vllm")).json()
        assert untouched()
    assert listing["probing"] is True
    assert [(w["tp_rank"], w["probe_failures"]) for w in listing["workers"]] == [(0, 0)]


def test_a_worker_address_is_read_as_vllm_writes_it() -> None:
    assert tcp_address("tcp://10.0.0.7:5555") == ("10.0.0.7", 5555)
    assert tcp_address("tcp://[::1]:5555") == ("::1", 5555)
    assert tcp_address("tcp://h:0") is None
    assert tcp_address("ipc:///tmp/x") is None
