"""The role cap: distinct roles per namespace and record kind are bounded, on every store, exactly."""

from __future__ import annotations

from typing import Any

import pytest

from aiobootstrap import ServerConfig
from aiobootstrap._names import PARALLELISM_CONFIG
from aiobootstrap.exceptions import TooManyRanks
from aiobootstrap.store import Key, StoreLimits

from .helpers.stores import (  # noqa: F401 - the fixtures, made for every store flavor
    OpenStore,
    feed,
    flavor,
    key,
    open_store,
    put_all,
)

CAP = 3


async def test_the_role_cap_is_exact_under_concurrent_new_roles(open_store: OpenStore) -> None:  # noqa: F811
    """40 new roles put at once under a cap of 3: exactly 3 are stored, the rest are 409s.

    Fails before issue 18: roles had no bound (60,000 held 133 MiB).
    """
    store = await open_store(StoreLimits(max_roles=CAP))
    records, errors = await put_all(store, [key(0, role=f"r{number}") for number in range(40)])
    assert len(records) == CAP
    assert len(errors) == 40 - CAP
    assert all(isinstance(error, TooManyRanks) for error in errors)
    assert "--max-roles" in str(errors[0])


async def test_a_held_role_has_room_another_kind_counts_apart_and_a_role_emptied_frees_its_place(
    open_store: OpenStore,  # noqa: F811
) -> None:
    """At the cap: a held role takes new ranks, another kind or namespace has its own count, and
    unregistering a role's last rank makes room for a new role."""
    store = await open_store(StoreLimits(max_roles=CAP))
    for number in range(CAP):
        await store.put(key(0, role=f"r{number}"), {"session_id": "s", "weights_info_dict": {}})
    with pytest.raises(TooManyRanks):
        await store.put(key(0, role="new"), {"x": 1})
    await store.put(key(7, role="r0"), {"x": 1})
    await store.put(Key("default", PARALLELISM_CONFIG, "new", 0), {"tp": 1})
    await store.put(key(0, namespace="other", role="new"), {"x": 1})
    await store.delete(key(0, role="r1"))
    await store.put(key(0, role="new"), {"x": 1})
    with pytest.raises(TooManyRanks):
        await store.put(key(0, role="r1"), {"x": 1})


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig(max_roles=2, world_size=1)


async def test_a_new_role_past_max_roles_is_409_over_http(client: Any) -> None:
    """With --max-roles 2 (and --world-size 1, which lifts only the rank cap), a third role is 409."""
    body = {"rank": 0, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {}}}
    for role in ("a", "b"):
        assert (await client.put("/register_transfer_engine_info", json={**body, "role": role})).status == 200
    refused = await client.put("/register_transfer_engine_info", json={**body, "role": "c"})
    assert refused.status == 409
    assert "--max-roles" in (await refused.json())["detail"]
