"""Leases over HTTP (SPEC section 9): grant, keepalive, read, revoke, records on a lease, bad input.

Expiry with tiny TTLs is pinned in ``test_lease_store.py``, on the store and
its timer directly: the routes accept a ``ttl`` of one second at least.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.app import REGISTRY

from .helpers.registry import registration
from .helpers.waits import GUARD

REGISTER = "/register_transfer_engine_info"
CONFIG = "/register_parallelism_config"
ENCODER = "/register_encoder_url"


@pytest.fixture
async def client(aiohttp_client: Any, config: ServerConfig) -> Any:
    return await aiohttp_client(create_app(config), server_kwargs={"handler_cancellation": True})


async def _grant(client: Any, ttl: float = 30, prefix: str = "") -> str:
    response = await client.post(f"{prefix}/leases", json={"ttl": ttl})
    assert response.status == 200, await response.text()
    body = await response.json()
    assert body["ttl"] == ttl
    lease: str = body["lease"]
    return lease


def _on(lease: str | None, body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "lease": lease}


async def _register_all(client: Any, lease: str, prefix: str = "") -> None:
    """One record of every kind on ``lease``."""
    assert (await client.put(f"{prefix}{REGISTER}", json=_on(lease, registration(0)))).status == 200
    body = {"rank": 0, "role": "draft", "parallelism_config": {"tp": 2}, "lease": lease}
    assert (await client.put(f"{prefix}{CONFIG}", json=body)).status == 200
    assert (await client.post(f"{prefix}{ENCODER}", json={"url": "http://e1", "lease": lease})).status == 200


async def test_grant_keepalive_read_and_revoke(client: Any) -> None:
    """A lease is granted, kept alive (full TTL again), read with its records, and revoked."""
    lease = await _grant(client, 30)
    keep = await client.post(f"/leases/{lease}/keepalive")
    assert keep.status == 200
    assert await keep.json() == {"lease": lease, "ttl": 30}
    await _register_all(client, lease)
    read = await (await client.get(f"/leases/{lease}")).json()
    assert read["lease"] == lease
    assert read["ttl"] == 30
    assert 29 < read["remaining"] <= 30
    assert read["records"] == [
        {"kind": "transfer_engine_info", "role": "target", "rank": 0},
        {"kind": "parallelism_config", "role": "draft", "rank": 0},
        {"kind": "encoder_urls", "url": "http://e1"},
    ]
    revoke = await client.delete(f"/leases/{lease}")
    assert revoke.status == 200
    assert await revoke.text() == "OK"
    assert (await client.get("/get_transfer_engine_info?rank=0")).status == 404
    assert (await client.get("/get_parallelism_config?rank=0&role=draft")).status == 404
    assert (await (await client.get("/list_encoder_urls")).json())["encoder_urls"] == []
    gone = await client.get(f"/leases/{lease}")
    assert gone.status == 404
    assert await gone.json() == {"detail": f"No lease {lease}: it expired or was revoked.", "lease": lease}


async def test_a_fractional_ttl_is_answered_as_sent(client: Any) -> None:
    assert await _grant(client, 2.5)


async def test_revoking_wakes_a_list_waiter_with_a_new_version(client: Any) -> None:
    """Revocation deletes as unregister does: a change with a new version, and waiters told."""
    lease = await _grant(client)
    await client.post(ENCODER, json={"url": "http://e1", "lease": lease})
    listed = await (await client.get("/list_encoder_urls")).json()
    waiter = asyncio.ensure_future(client.get(f"/list_encoder_urls?after={listed['version']}&wait=30"))
    registry = client.app[REGISTRY]
    async with asyncio.timeout(GUARD):
        while registry.parked == 0:  # noqa: ASYNC110 (yield until the waiter is parked)
            await asyncio.sleep(0)
    assert (await client.delete(f"/leases/{lease}")).status == 200
    async with asyncio.timeout(GUARD):
        woken = await (await waiter).json()
    assert woken["encoder_urls"] == []
    assert woken["version"] == listed["version"] + 1


async def test_a_record_moves_between_leases_and_off_them(client: Any) -> None:
    """Registered again under another lease it moves; registered with none it leaves the lease."""
    first, second = await _grant(client), await _grant(client)
    await client.put(REGISTER, json=_on(first, registration(1)))
    await client.put(REGISTER, json=_on(second, registration(1)))
    assert (await (await client.get(f"/leases/{first}")).json())["records"] == []
    assert (await client.delete(f"/leases/{first}")).status == 200
    assert (await client.get("/get_transfer_engine_info?rank=1")).status == 200
    await client.put(REGISTER, json=registration(1))  # no lease now
    assert (await (await client.get(f"/leases/{second}")).json())["records"] == []
    assert (await client.delete(f"/leases/{second}")).status == 200
    assert (await client.get("/get_transfer_engine_info?rank=1")).status == 200


async def test_an_unknown_lease_on_a_register_stores_nothing(client: Any) -> None:
    """Every register route answers the lease 404 and changes nothing."""
    missing = {"detail": "No lease nope: it expired or was revoked.", "lease": "nope"}
    for method, path, body in [
        ("PUT", REGISTER, _on("nope", registration(2))),
        ("PUT", CONFIG, {"rank": 2, "parallelism_config": {}, "lease": "nope"}),
        ("POST", ENCODER, {"url": "http://e2", "lease": "nope"}),
    ]:
        response = await client.request(method, path, json=body)
        assert response.status == 404
        assert await response.json() == missing
    listing = await (await client.get("/ranks")).json()
    assert listing["count"] == 0
    assert listing["version"] == 0
    assert (await (await client.get("/list_encoder_urls")).json())["encoder_urls"] == []


@pytest.mark.parametrize("path", ["/leases/nope/keepalive", "/leases/nope"])
async def test_an_unknown_lease_is_404_on_every_lease_route(client: Any, path: str) -> None:
    method = "POST" if path.endswith("keepalive") else "GET"
    for verb in [method, "DELETE"] if method == "GET" else [method]:
        response = await client.request(verb, path)
        assert response.status == 404
        assert (await response.json())["lease"] == "nope"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"ttl": 0},
        {"ttl": -5},
        {"ttl": 0.5},
        {"ttl": 86_401},
        {"ttl": 10**400},
        {"ttl": "10"},
        {"ttl": True},
        {"ttl": None},
        {"ttl": [10]},
    ],
)
async def test_every_bad_ttl_is_a_400_that_grants_nothing(client: Any, body: dict[str, Any]) -> None:
    response = await client.post("/leases", json=body)
    assert response.status == 400
    detail = (await response.json())["detail"]
    assert "ttl" in detail
    assert detail.endswith(".")
    assert detail.count(".") <= 2
    assert len(client.app[REGISTRY].store.lease_table) == 0


async def test_a_nan_ttl_is_a_400(client: Any) -> None:
    response = await client.post(
        "/leases", data=b'{"ttl": NaN}', headers={"Content-Type": "application/json"}
    )
    assert response.status == 400
    assert len(client.app[REGISTRY].store.lease_table) == 0


@pytest.mark.parametrize("lease", [5, True, "", ["x"], {"id": "x"}])
async def test_a_lease_id_that_is_not_a_string_is_a_400_that_stores_nothing(client: Any, lease: Any) -> None:
    for method, path, body in [
        ("PUT", REGISTER, _on(lease, registration(2))),
        ("POST", ENCODER, {"url": "http://e2", "lease": lease}),
    ]:
        response = await client.request(method, path, json=body)
        assert response.status == 400
        assert "lease" in (await response.json())["detail"]
    assert (await (await client.get("/ranks")).json())["version"] == 0


async def test_leases_live_in_their_namespace(client: Any) -> None:
    """Lease routes are served under /ns/{name}; a lease of one namespace is unknown in another."""
    lease = await _grant(client, prefix="/ns/blue")
    await _register_all(client, lease, prefix="/ns/blue")
    assert (await client.get(f"/leases/{lease}")).status == 404
    assert (await client.put(REGISTER, json=_on(lease, registration(0)))).status == 404
    assert (await client.get(f"/ns/blue/leases/{lease}")).status == 200
    assert (await client.delete(f"/ns/blue/leases/{lease}")).status == 200
    assert (await client.get("/ns/blue/get_transfer_engine_info?rank=0")).status == 404


@pytest.mark.parametrize("config", [ServerConfig(max_leases=2)])
async def test_past_max_leases_a_grant_is_409(client: Any) -> None:
    first = await _grant(client)
    await _grant(client, prefix="/ns/blue")  # a namespace holds half of them at most (test_lease_share.py)
    refused = await client.post("/ns/green/leases", json={"ttl": 10})
    assert refused.status == 409
    assert "--max-leases" in (await refused.json())["detail"]
    await client.delete(f"/leases/{first}")
    await _grant(client)


def test_max_leases_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max leases"):
        ServerConfig(max_leases=0)


async def _serves_the_lease_routes(client: Any) -> None:
    """Grant, register every kind on the lease, read, keep alive, revoke: the records go with it."""
    lease = await _grant(client)
    await _register_all(client, lease)
    assert len((await (await client.get(f"/leases/{lease}")).json())["records"]) == 3
    assert (await client.post(f"/leases/{lease}/keepalive")).status == 200
    assert (await client.delete(f"/leases/{lease}")).status == 200
    assert (await client.get("/get_transfer_engine_info?rank=0")).status == 404
    assert (await (await client.get("/list_encoder_urls")).json())["encoder_urls"] == []


async def test_the_redis_store_serves_the_lease_routes(aiohttp_client: Any, shared_redis: Any) -> None:
    """Over Redis too: grant, register every kind on the lease, read, keepalive, revoke (no 501 any more)."""
    config = dataclasses.replace(ServerConfig(), store=shared_redis.url, store_prefix="leases-redis")
    client = await aiohttp_client(create_app(config))
    await _serves_the_lease_routes(client)
    response = await client.put(REGISTER, json=_on("x", registration(0)))
    assert response.status == 404


async def test_the_file_store_serves_the_lease_routes(aiohttp_client: Any, tmp_path: Any) -> None:
    """Over the file store too: grant, register on the lease, read, revoke."""
    client = await aiohttp_client(create_app(ServerConfig(state_file=str(tmp_path / "state"))))
    await _serves_the_lease_routes(client)
