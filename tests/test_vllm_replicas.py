"""vLLM's workers through two replicas of one registry, over Redis and over etcd: two engines claiming one
dp rank at once (one through each replica) are one winner and vLLM's mismatch; a wait parked on one
replica answers registrations through the other; a worker restarted through the other replica replaces
its record; a dead worker probed by both replicas is deleted, and logged, once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.appkeys import REGISTRY
from aiobootstrap.server.faces.vllm.probes import VllmProbes
from testbed.etcd_server import unique_prefix
from testbed.redis_server import free_port

from .helpers.waits import GUARD, parked_get


@contextlib.contextmanager
def live() -> Iterator[str]:
    """A side channel that answers a connect."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"


def worker(engine: str, addr: str, tp: int = 0) -> dict[str, Any]:
    return {"engine_id": engine, "dp_rank": 0, "tp_rank": tp, "pp_rank": 0, "addr": addr}


@pytest.fixture(params=["redis", "etcd"])
async def replicas(request: pytest.FixtureRequest, aiohttp_client: Any) -> tuple[Any, Any]:
    if request.param == "redis":
        redis = request.getfixturevalue("shared_redis")
        config = ServerConfig(store=redis.url, store_prefix=f"vllm-{unique_prefix()}")
    else:
        config = ServerConfig(store=request.getfixturevalue("shared_etcd").url(unique_prefix()))
    kwargs = {"server_kwargs": {"handler_cancellation": True}}
    return await aiohttp_client(create_app(config), **kwargs), await aiohttp_client(
        create_app(config), **kwargs
    )


async def test_two_engines_at_once_are_one_winner_and_a_mismatch(replicas: tuple[Any, Any]) -> None:
    a, b = replicas
    with live() as first, live() as second:
        replies = await asyncio.gather(
            a.post("/register", json=worker("engine-a", first)),
            b.post("/register", json=worker("engine-b", second)),
        )
        statuses = sorted(reply.status for reply in replies)
        assert statuses == [200, 400]
        (refused,) = [reply for reply in replies if reply.status == 400]
        assert (await refused.json())["detail"].startswith(
            "Engine ID mismatch for dp_rank=0: expected engine-"
        )
        for replica in (a, b):
            got = json.loads(await (await replica.get("/query")).read())
            assert list(got) == ["0"]
            assert len(got["0"]["worker_addr"]) == 1


async def test_a_wait_on_one_replica_hears_the_other_and_a_restart_through_it(
    replicas: tuple[Any, Any],
) -> None:
    a, b = replicas
    waiting = await parked_get(b, f"/query?wait={GUARD}&tp_size=2")
    old = f"tcp://127.0.0.1:{free_port()}"
    assert (await a.post("/register", json=worker("e", old, tp=0))).status == 200
    assert (await a.post("/register", json=worker("e", "tcp://h:2", tp=1))).status == 200
    reply = await asyncio.wait_for(waiting, GUARD)
    assert reply.status == 200
    assert json.loads(await reply.read())["0"]["worker_addr"]["0"] == {"0": old}
    new = f"tcp://127.0.0.1:{free_port()}"
    assert (await b.post("/register", json=worker("e", new, tp=0))).status == 200
    got = json.loads(await (await a.get("/query")).read())
    assert got["0"]["worker_addr"]["0"] == {"0": new}


async def test_a_dead_worker_probed_by_both_replicas_is_deleted_once(
    replicas: tuple[Any, Any], caplog: pytest.LogCaptureFixture
) -> None:
    a, b = replicas
    assert (await a.post("/register", json=worker("e", f"tcp://127.0.0.1:{free_port()}"))).status == 200
    probes = [VllmProbes(replica.app[REGISTRY], timeout=1.0) for replica in (a, b)]
    with caplog.at_level(logging.WARNING, "aiobootstrap"):
        for _ in range(3):
            await asyncio.gather(*(prober.round() for prober in probes))
    assert await (await b.get("/query")).read() == b"{}"
    assert len([r for r in caplog.records if r.getMessage().startswith("forgot vLLM worker")]) == 1
