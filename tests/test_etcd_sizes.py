"""Large values over etcd (issue 41, item 4), against a real member (``shared_etcd``), a prefix per test.

A namespace's writes that wait together share one transaction (``store/etcd/namespaces.py``): many large
values at once used to make one transaction past etcd's request limit (``--max-request-bytes``, 1.5 MiB by
default), which etcd refused whole, so every write of it was a ``503``. A value too large for etcd even
alone was a ``503`` "unreachable" with ``Retry-After``, which never succeeds, and the small writes batched
beside it failed with its error.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from aiobootstrap import ServerConfig, create_app
from testbed.etcd_server import Cluster, unique_prefix

from .helpers.redis_store import Recorder
from .helpers.stores import key
from .helpers.waits import GUARD

LARGE = 200 * 1024
"""One value's bytes: far below etcd's limit alone, past it sixteen at once."""


def _path(name: str) -> str:
    return "/metadata?key=" + quote(f"mooncake/ram/{name}", safe="")


async def _server(aiohttp_client: Any, cluster: Cluster) -> Any:
    return await aiohttp_client(create_app(ServerConfig(store=cluster.url(unique_prefix()))))


async def test_sixteen_large_values_at_once_in_one_namespace_are_all_stored(
    aiohttp_client: Any, shared_etcd: Cluster
) -> None:
    """16 PUTs of 200 KiB at once: each 200, and each read back whole (13-15 of 16 were 503 before)."""
    client = await _server(aiohttp_client, shared_etcd)
    values = {f"engine-{index}": bytes([65 + index]) * LARGE for index in range(16)}

    async def put(name: str, value: bytes) -> int:
        async with client.put(_path(name), data=value) as reply:
            await reply.read()
            return int(reply.status)

    async with asyncio.timeout(GUARD):
        statuses = await asyncio.gather(*(put(name, value) for name, value in values.items()))
    assert statuses == [200] * 16
    for name, value in values.items():
        async with client.get(_path(name)) as reply:
            assert (reply.status, await reply.read()) == (200, value)


async def test_a_value_too_large_for_etcd_is_a_413_naming_the_limit_and_the_writes_beside_it_are_stored(
    aiohttp_client: Any, shared_etcd: Cluster
) -> None:
    """300 KiB of NUL bytes (about 1.8 MB once JSON escapes them) with eight small PUTs at once: the large one
    is a 413 naming etcd's request limit, without Retry-After (it will never be taken), nothing stored; the
    small ones are 200."""
    client = await _server(aiohttp_client, shared_etcd)

    async def put(name: str, value: bytes) -> tuple[int, str, str | None]:
        async with client.put(_path(name), data=value) as reply:
            return int(reply.status), await reply.text(), reply.headers.get("Retry-After")

    async with asyncio.timeout(GUARD):
        huge, *small = await asyncio.gather(
            put("huge", b"\x00" * 300 * 1024), *(put(f"small-{index}", b"x" * 64) for index in range(8))
        )
    status, text, retry_after = huge
    assert status == 413, text
    assert "--max-request-bytes" in text
    assert "1,572,864" in text
    assert retry_after is None
    assert [reply[0] for reply in small] == [200] * 8
    async with client.get(_path("huge")) as reply:
        assert reply.status == 404
    for index in range(8):
        async with client.get(_path(f"small-{index}")) as reply:
            assert (reply.status, await reply.read()) == (200, b"x" * 64)


async def test_a_cluster_with_a_lower_request_limit_takes_a_batch_in_halves(etcd_unstarted: Cluster) -> None:
    """etcd started with ``--max-request-bytes 262144``: four values of 100 KiB at once (within the store's
    own budget, past the cluster's) are each stored, the batch sent again in halves; one of 300 KiB alone
    is a 413."""
    from aiobootstrap.store.etcd import EtcdStore

    member = etcd_unstarted.members[0]
    member.extra_args = ["--max-request-bytes", str(256 * 1024)]
    etcd_unstarted.start()
    store = EtcdStore(etcd_unstarted.url(unique_prefix()))
    await store.open(Recorder())
    try:
        async with asyncio.timeout(GUARD):
            records = await asyncio.gather(
                *(store.put(key(rank), {"blob": "v" * 100 * 1024}) for rank in range(4)),
                store.put(key(9), {"blob": "w" * 300 * 1024}),
                return_exceptions=True,
            )
        assert [type(record).__name__ for record in records] == ["Record"] * 4 + ["PayloadTooLarge"]
        assert sorted(record.version for record in records[:4]) == [1, 2, 3, 4]  # type: ignore[union-attr]
        assert await store.get(key(9)) is None
    finally:
        await store.close()
