"""A lease kept alive while its store stalls (issue 41, item 5), against a real etcd member (and a real Redis)
of the test's own that the test pauses with SIGSTOP and resumes with SIGCONT.

What a client sees (docs/scale-out.md, the failure matrix over etcd): a keepalive answers a ``503`` within its
own deadline (1 s), not the store's (3 s), since a client keeps a lease alive every third of its TTL; the
lease lives on if etcd kept it (a stall shorter than its TTL), and a stall longer than the TTL ends it as
etcd decides (its lessor counts the stall): the next keepalive is a ``404`` and the lease's records are
released, a version each, as for any lease that expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from testbed.etcd_server import Cluster, unique_prefix
from testbed.redis_server import REDIS_SERVER, SKIP_REASON, RedisServer

from .helpers.waits import GUARD

REGISTER = "/register_transfer_engine_info"
GET = "/get_transfer_engine_info?rank=0"


@contextlib.contextmanager
def _paused(cluster: Cluster) -> Iterator[None]:
    """The member stopped (SIGSTOP) for the block, and resumed (SIGCONT) whatever the block raised."""
    process = cluster.members[0].process
    assert process is not None
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(process.pid, signal.SIGCONT)


async def _leased_record(client: Any, ttl: int) -> str:
    granted = await client.post("/leases", json={"ttl": ttl})
    assert granted.status == 200, await granted.text()
    lease: str = (await granted.json())["lease"]
    body = {"rank": 0, "transfer_engine_info": {"session_id": "s0", "weights_info_dict": {}}, "lease": lease}
    assert (await client.put(REGISTER, json=body)).status == 200
    return lease


async def test_a_keepalive_on_a_stalled_etcd_is_a_quick_503_and_the_lease_lives_on(
    aiohttp_client: Any, etcd_member: Cluster
) -> None:
    """A stall shorter than the TTL: the keepalive is a 503 with Retry-After under its own 1 s deadline (the
    store's is 3 s: it said 'within 3 s' before); resumed, the next is a 200 and the record is still there."""
    client = await aiohttp_client(create_app(ServerConfig(store=etcd_member.url(unique_prefix()))))
    lease = await _leased_record(client, ttl=30)
    with _paused(etcd_member):
        async with asyncio.timeout(GUARD):
            stalled = await client.post(f"/leases/{lease}/keepalive")
        detail = (await stalled.json())["detail"]
    assert stalled.status == 503, detail
    assert "Retry-After" in stalled.headers
    assert "did not answer within 1 s" in detail
    async with asyncio.timeout(GUARD):
        # A client retries a 503 (the member is resuming); etcd tells nothing to wait on.
        while (kept := await client.post(f"/leases/{lease}/keepalive")).status == 503:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    assert kept.status == 200, await kept.text()
    assert (await kept.json())["ttl"] == 30
    assert (await client.get(GET)).status == 200


async def test_a_stall_longer_than_the_ttl_ends_the_lease_as_etcd_decides(
    aiohttp_client: Any, etcd_member: Cluster
) -> None:
    """etcd stopped past a 2 s lease's TTL: resumed, etcd ends the lease, the keepalive is a 404, and its
    record is released (the worker grants a new lease and registers again)."""
    client = await aiohttp_client(create_app(ServerConfig(store=etcd_member.url(unique_prefix()))))
    lease = await _leased_record(client, ttl=2)
    with _paused(etcd_member):
        await asyncio.sleep(3.5)  # the stall itself: past the TTL (etcd's clock runs on while it is stopped)
    async with asyncio.timeout(GUARD):
        while (after := await client.post(f"/leases/{lease}/keepalive")).status == 503:  # noqa: ASYNC110
            await asyncio.sleep(0.1)  # a client's retry, as above
    assert after.status == 404, await after.text()
    async with asyncio.timeout(GUARD):
        # Released once the replica's feed hears etcd end it: read as a client would.
        while (await client.get(GET)).status != 404:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def test_a_keepalive_on_a_paused_redis_is_a_quick_503_and_the_lease_lives_on(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """The same over Redis: its keepalive's own 1 s deadline, then a 200 once Redis runs again."""
    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    server = RedisServer(tmp_path)
    server.start()
    try:
        client = await aiohttp_client(create_app(ServerConfig(store=server.url)))
        lease = await _leased_record(client, ttl=30)
        server.pause()
        try:
            async with asyncio.timeout(GUARD):
                stalled = await client.post(f"/leases/{lease}/keepalive")
            detail = (await stalled.json())["detail"]
        finally:
            server.resume()
        assert stalled.status == 503, detail
        assert "Retry-After" in stalled.headers
        assert "did not answer within 1 s" in detail
        async with asyncio.timeout(GUARD):
            while (kept := await client.post(f"/leases/{lease}/keepalive")).status == 503:  # noqa: ASYNC110
                await asyncio.sleep(0.1)  # a client's retry
        assert kept.status == 200, await kept.text()
        assert (await client.get(GET)).status == 200
    finally:
        server.stop()
