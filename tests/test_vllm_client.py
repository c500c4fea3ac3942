"""The clients' vLLM calls (async and sync) against the real app: a prefill worker registered, decode's query
read back as vLLM reads it, a wait for a complete deployment (and its ``503`` at the deadline), the engine
mismatch as ``BadRequest``, a worker on a lease, and a registration replayed to a restarted server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import aiobootstrap
from aiobootstrap import (
    BadRequest,
    BootstrapClient,
    BootstrapServer,
    RankNotRegistered,
    ServerConfig,
    SyncBootstrapClient,
)
from aiobootstrap.client.vllm import VllmWorkers
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.server.faces.vllm.inprocess import VllmBootstrapServer
from aiobootstrap.wire.vllm import Engine, mismatch_detail

from .helpers.clients import _restart
from .helpers.side_channel import router
from .helpers.waits import GUARD, until

ENGINE = "3f1c9a52-8d0e-4b6e-9a57-0c2d4e6f8a10_dp0"


@pytest.fixture
def url(client: Any) -> str:
    return str(client.make_url("")).rstrip("/")


async def test_a_registered_worker_is_read_back_as_decode_reads_it(url: str) -> None:
    """``register_vllm_worker`` then ``query_vllm_workers``: each dp rank's engine and addresses by tp then pp
    rank, the TP size decode derives, and the namespace's version; ``{}`` before any worker."""
    async with BootstrapClient(url, namespace="pd") as client:
        empty = await client.query_vllm_workers()
        assert empty.engines == {}
        await client.register_vllm_worker(ENGINE, 0, 0, 0, "tcp://10.0.0.7:40100")
        await client.register_vllm_worker(ENGINE, 0, 1, 0, "tcp://10.0.0.8:40101")
        await client.register_vllm_worker(ENGINE, 0, 1, 0, "tcp://10.0.0.8:40101")  # a retry: 200, no change
        workers = await client.query_vllm_workers()
        assert workers.engines == {
            0: Engine(ENGINE, {0: {0: "tcp://10.0.0.7:40100"}, 1: {0: "tcp://10.0.0.8:40101"}})
        }
        assert workers.engines[0].tp_size == 2
        assert workers.version > empty.version
        status = await client.vllm_status()
        assert status["worker_count"] == 2
        assert {worker["addr"] for worker in status["workers"]} == {
            "tcp://10.0.0.7:40100",
            "tcp://10.0.0.8:40101",
        }
    async with BootstrapClient(url, namespace="other") as other:
        assert (await other.query_vllm_workers()).engines == {}


async def test_a_wait_answers_once_the_deployment_is_complete(client: Any, url: str) -> None:
    """``wait_vllm_workers(tp_size=2)`` parks until every registered dp rank has both tp ranks: decode never
    takes a partial deployment's TP size."""
    registry = client.server.app[REGISTRY]
    async with BootstrapClient(url) as vllm:
        await vllm.register_vllm_worker(ENGINE, 0, 0, 0, "tcp://10.0.0.7:40100")
        parked = registry.parked
        waiting = asyncio.create_task(vllm.wait_vllm_workers(tp_size=2, timeout=GUARD))
        await until(lambda: registry.parked == parked + 1)
        await vllm.register_vllm_worker(ENGINE, 0, 1, 0, "tcp://10.0.0.8:40101")
        workers = await asyncio.wait_for(waiting, GUARD)
        assert workers.engines[0].tp_size == 2


async def test_a_wait_that_runs_out_names_what_is_missing(url: str) -> None:
    """At the deadline, :class:`RankNotRegistered` (a ``NotRegistered``, as ``get`` raises) with the server's
    sentence (the ``503``): which dp rank lacks which tp ranks, or how many dp ranks are registered."""
    async with BootstrapClient(url) as client:
        await client.register_vllm_worker(ENGINE, 0, 0, 0, "tcp://10.0.0.7:40100")
        with pytest.raises(RankNotRegistered, match="dp_rank=0 lacks tp_rank=1 pp_rank=0"):
            await client.wait_vllm_workers(tp_size=2, timeout=0.2)
        with pytest.raises(RankNotRegistered, match="1 of 2 dp ranks registered"):
            await client.wait_vllm_workers(tp_size=1, dp_size=2, timeout=0.2)
        assert (await client.wait_vllm_workers(tp_size=1, timeout=GUARD)).engines[0].tp_size == 1
        with pytest.raises(RankNotRegistered, match="1 of 2 dp ranks registered"):
            await client.wait_vllm_workers(dp_size=2, timeout=0.2)  # dp ranks counted, not their workers
        with pytest.raises(ValueError, match="pp_size needs tp_size"):
            await client.wait_vllm_workers(pp_size=2)
        with pytest.raises(TypeError, match="tp_size is an int"):
            await client.wait_vllm_workers(tp_size="2")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="dp_rank is an int"):
            await client.register_vllm_worker(ENGINE, "0", 0, 0, "tcp://10.0.0.7:40100")  # type: ignore[arg-type]


@pytest.mark.parametrize("config", [ServerConfig(max_wait=0.05)])
async def test_a_wait_outlasts_the_servers_max_wait(client: Any, url: str) -> None:
    """A server whose ``--max-wait`` is shorter than the call answers ``503`` (not complete) at its own
    deadline; the client asks again, and answers once the deployment is complete."""
    registry = client.server.app[REGISTRY]
    async with BootstrapClient(url) as vllm:
        await vllm.register_vllm_worker(ENGINE, 0, 0, 0, "tcp://10.0.0.7:40100")
        waiting = asyncio.create_task(vllm.wait_vllm_workers(tp_size=2, timeout=GUARD))
        await until(lambda: registry.parked == 1)
        await until(lambda: registry.parked == 0)  # the server's 503
        await until(lambda: registry.parked == 1)  # asked again
        assert not waiting.done()
        await vllm.register_vllm_worker(ENGINE, 0, 1, 0, "tcp://10.0.0.8:40101")
        assert (await asyncio.wait_for(waiting, GUARD)).engines[0].tp_size == 2


async def test_after_waits_for_a_change_and_answers_unchanged_at_the_deadline(client: Any, url: str) -> None:
    """``after=V`` answers the first change past ``V``; with none by the deadline, the workers as they are,
    their version ``V`` (an unchanged deployment is an answer, as the encoder list's is)."""
    registry = client.server.app[REGISTRY]
    async with BootstrapClient(url) as vllm:
        await vllm.register_vllm_worker(ENGINE, 0, 0, 0, "tcp://10.0.0.7:40100")
        now = await vllm.query_vllm_workers()
        unchanged = await vllm.wait_vllm_workers(after=now.version, timeout=0.2)
        assert unchanged == now
        parked = registry.parked
        waiting = asyncio.create_task(vllm.wait_vllm_workers(after=now.version, timeout=GUARD))
        await until(lambda: registry.parked == parked + 1)
        await vllm.register_vllm_worker(ENGINE, 0, 0, 0, "tcp://10.0.0.7:40200")  # the worker restarted
        moved = await asyncio.wait_for(waiting, GUARD)
        assert moved.version > now.version
        assert moved.engines[0].worker_addr == {0: {0: "tcp://10.0.0.7:40200"}}


async def test_another_engine_on_a_live_dp_rank_is_vllms_mismatch(url: str) -> None:
    """While a worker of the engine holding dp rank 0 answers, another engine there raises :class:`BadRequest`
    with vLLM's sentence, and nothing changes; once none answers, the new engine takes the dp rank over."""
    async with BootstrapClient(url) as client:
        with router() as (addr, quiet):
            await client.register_vllm_worker("old", 0, 0, 0, addr)
            with pytest.raises(BadRequest) as refused:
                await client.register_vllm_worker("new", 0, 0, 0, "tcp://127.0.0.1:9")
            assert str(refused.value) == mismatch_detail(0, "old", "new")
            assert (await client.query_vllm_workers()).engines[0].engine_id == "old"
            assert quiet()  # connected to, never sent a message its worker's loop would read
        await client.register_vllm_worker("new", 0, 0, 0, "tcp://127.0.0.1:9")
        assert (await client.query_vllm_workers()).engines == {
            0: Engine("new", {0: {0: "tcp://127.0.0.1:9"}})
        }


async def test_a_malformed_worker_is_a_bad_request_with_nothing_stored(url: str) -> None:
    async with BootstrapClient(url) as client:
        with pytest.raises(BadRequest, match="dp_rank must be an integer"):
            await client.register_vllm_worker(ENGINE, -1, 0, 0, "tcp://10.0.0.7:40100")
        with pytest.raises(BadRequest, match="addr must be a non-empty"):
            await client.register_vllm_worker(ENGINE, 0, 0, 0, "")
        assert (await client.query_vllm_workers()).engines == {}


async def test_a_worker_on_a_lease_leaves_with_it_and_comes_back_on_a_regrant(client: Any, url: str) -> None:
    """``lease=``: the worker lives while the lease does; a lease found gone is granted again and the worker
    registered again; the block's end revokes it, and the worker leaves ``/query``."""
    store = client.server.app[REGISTRY].store
    async with BootstrapClient(url, namespace="pd") as vllm:
        async with vllm.lease(ttl=30) as lease:
            await vllm.register_vllm_worker(ENGINE, 0, 0, 0, "tcp://10.0.0.7:40100", lease=lease)
            lost = lease.id
            await store.revoke_lease("pd", lost)
            assert (await vllm.query_vllm_workers()).engines == {}
            await lease.keepalive()  # finds the lease gone: granted again, the worker registered again
            assert lease.id != lost
            assert (await vllm.query_vllm_workers()).engines[0].worker_addr == {
                0: {0: "tcp://10.0.0.7:40100"}
            }
        assert (await vllm.query_vllm_workers()).engines == {}


async def test_a_restarted_server_gets_its_workers_back() -> None:
    """With ``reregister=True``, a server restarted empty on its port is sent the client's workers again (the
    newest address of each) before the client's next request is answered."""
    server = await BootstrapServer(port=0).__aenter__()
    try:
        async with BootstrapClient(server.url, reregister=True) as vllm:
            await vllm.register_vllm_worker(ENGINE, 0, 0, 0, "tcp://10.0.0.7:40100")
            await vllm.register_vllm_worker(ENGINE, 0, 0, 0, "tcp://10.0.0.7:40200")
            await vllm.register_vllm_worker(ENGINE, 0, 1, 0, "tcp://10.0.0.8:40101")
            server = await _restart(server)
            workers = await vllm.wait_vllm_workers(tp_size=2, timeout=GUARD)
            assert workers.engines == {
                0: Engine(ENGINE, {0: {0: "tcp://10.0.0.7:40200"}, 1: {0: "tcp://10.0.0.8:40101"}})
            }
    finally:
        await server.close()


async def test_the_sync_client(url: str) -> None:
    def blocking() -> VllmWorkers:
        with SyncBootstrapClient(url) as client:
            client.register_vllm_worker(ENGINE, 0, 0, 0, "tcp://10.0.0.7:40100")
            return client.wait_vllm_workers(tp_size=1, timeout=GUARD)

    workers = await asyncio.to_thread(blocking)
    assert workers.engines == {0: Engine(ENGINE, {0: {0: "tcp://10.0.0.7:40100"}})}


def test_the_drop_in_is_a_public_name() -> None:
    """``aiobootstrap.VllmBootstrapServer`` is the vLLM face's in-process drop-in, listed in ``__all__``."""
    assert "VllmBootstrapServer" in aiobootstrap.__all__
    assert aiobootstrap.VllmBootstrapServer is VllmBootstrapServer


async def test_watch_tells_each_workers_change_by_its_name(url: str) -> None:
    """``client.watch(kind="vllm_worker")`` yields a worker's registration, and its move to a new address,
    each named by the worker's ranks (``dp0-tp1-pp0``)."""
    async with BootstrapClient(url) as client:
        await client.register_vllm_worker(ENGINE, 0, 1, 0, "tcp://10.0.0.8:40101")
        await client.register_vllm_worker(ENGINE, 0, 1, 0, "tcp://10.0.0.8:40201")
        changes = client.watch(kind="vllm_worker")
        try:
            seen = [await asyncio.wait_for(anext(changes), GUARD) for _ in range(2)]
        finally:
            await changes.aclose()  # type: ignore[attr-defined]
    assert [(change.op, change.key) for change in seen] == [("put", "dp0-tp1-pp0")] * 2
    assert seen[0].version < seen[1].version
