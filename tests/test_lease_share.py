"""Each namespace's share of ``--max-leases`` (issue 41, item 10), on every store.

One open namespace (``* ns=mooncake-0`` in the token file: anyone may grant there without a token) used
to take every lease, so a scoped token's grant in another namespace was a ``409``. A namespace now holds at
most half of the room the other namespaces leave (``store.limits.lease_share``), counted atomically with
the grant by each store: one namespace takes at most half of ``--max-leases``, and a namespace holding
none finds room while any is left.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.exceptions import TooManyLeases
from aiobootstrap.store import StoreLimits
from aiobootstrap.store.limits import lease_share

from .helpers.stores import (  # noqa: F401 - the fixtures, made for every store flavor
    OpenStore,
    feed,
    flavor,
    open_store,
)


def test_a_namespace_share_is_half_of_what_the_others_leave() -> None:
    assert lease_share(50, 0, 0) == 25
    assert lease_share(50, 25, 25) == 25  # alone: half of everything
    assert lease_share(50, 25, 0) == 12  # the next namespace: half of what is left
    assert lease_share(8, 7, 0) == 1  # the last lease: a namespace holding none still finds room
    assert lease_share(1, 0, 0) == 1


async def _granted(store: Any, namespace: str, count: int) -> list[str]:
    """Grant ``count`` leases in ``namespace`` at once: the ids granted (a refusal must be TooManyLeases)."""
    results = await asyncio.gather(
        *(store.grant_lease(namespace, 30) for _ in range(count)), return_exceptions=True
    )
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, TooManyLeases):
            raise result
    return [result.id for result in results if not isinstance(result, BaseException)]


async def test_one_namespace_cannot_take_every_lease(open_store: OpenStore) -> None:  # noqa: F811
    """--max-leases 12: twelve grants at once in one namespace get six (its share, refused naming it); each
    other namespace then gets half of what is left, down to the last lease; a revoked lease is room again."""
    store = await open_store(StoreLimits(max_leases=12))
    taken = await _granted(store, "mooncake-0", 12)
    assert len(taken) == 6
    with pytest.raises(TooManyLeases, match="namespace mooncake-0 already holds 6 leases, its share"):
        await store.grant_lease("mooncake-0", 30)
    assert len(await _granted(store, "team-b", 4)) == 3  # (12 - 6) // 2
    assert len(await _granted(store, "team-c", 2)) == 1  # (12 - 9) // 2
    assert len(await _granted(store, "team-d", 2)) == 1  # (12 - 10) // 2
    assert len(await _granted(store, "team-e", 2)) == 1  # the last one
    with pytest.raises(TooManyLeases, match="--max-leases"):
        await store.grant_lease("team-f", 30)
    await store.revoke_lease("mooncake-0", taken[0])
    assert len(await _granted(store, "team-f", 1)) == 1


async def test_an_open_namespace_leaves_room_for_a_scoped_one_over_http(aiohttp_client: Any) -> None:
    """The issue's case: 50 tokenless grants in mooncake-0 with --max-leases 50, then one in team-b: 200."""
    client = await aiohttp_client(create_app(ServerConfig(max_leases=50)))

    async def grant(namespace: str) -> int:
        async with client.post(f"/ns/{namespace}/leases", json={"ttl": 30}) as reply:
            await reply.read()
            return int(reply.status)

    statuses = await asyncio.gather(*(grant("mooncake-0") for _ in range(50)))
    assert (statuses.count(200), statuses.count(409)) == (25, 25)
    assert await grant("team-b") == 200
