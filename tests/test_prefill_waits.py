"""The prefill face's waits, rooms, leases, watch, tokens and replicas: what aiobootstrap adds to SGLang's
PD bootstrap protocol (one request instead of 15 polls, rooms that expire, a rank that leaves with its
worker, a registration through one replica waking a decode parked on another)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.cli.parser import server_config, server_parser
from aiobootstrap.core.history import History
from aiobootstrap.server.appkeys import CONFIG, HISTORY, REGISTRY
from aiobootstrap.server.faces.prefill.settings import PrefillSettings
from aiobootstrap.server.tokens import Scope, TokenSet

from .helpers.prefill import ALL, rank_body, route
from .helpers.waits import GUARD, until


def _waits(client: Any) -> int:
    """Waits parked in the registry now (a decode's GET /route, a query of rooms)."""
    return int(client.app[REGISTRY].parked)


async def _register_all(client: Any) -> None:
    for tp, dp in ((0, 0), (1, 0), (0, 1), (1, 1)):
        assert (await client.put("/route", json=rank_body(tp, dp))).status == 200


async def test_a_parked_topology_wait_is_answered_by_the_last_rank(client: Any) -> None:
    """GET /route?ALL&wait=S holds until the last rank registers, then answers the parallel info at once."""
    waiting = asyncio.create_task(client.get(f"/route?{ALL}&wait=60"))
    await until(lambda: _waits(client) >= 1)
    for tp, dp in ((0, 0), (1, 0), (0, 1)):
        await client.put("/route", json=rank_body(tp, dp))
    assert not waiting.done()
    await client.put("/route", json=rank_body(1, 1))
    reply = await asyncio.wait_for(waiting, GUARD)
    assert reply.status == 200
    assert (await reply.json())["dp_size"] == 2


async def test_a_rank_wait_and_a_wait_that_runs_out(client: Any) -> None:
    """A wait for one rank holds until the topology is complete; one that runs out answers what it would have
    (the 503 with the count, the 404 for a rank outside the topology)."""
    reply = await client.get(f"/route?{ALL}&wait=0.1")
    assert (reply.status, await reply.text()) == (
        503,
        "Prefill server not fully registered yet (0 workers registered).",
    )
    waiting = asyncio.create_task(client.get(f"/route?{route(1, 0, 1, 0)}&wait=60"))
    await until(lambda: _waits(client) >= 1)
    await _register_all(client)
    reply = await asyncio.wait_for(waiting, GUARD)
    assert await reply.json() == {"rank_ip": "10.0.0.11", "rank_port": 17011}
    reply = await client.get(f"/route?{route(3, 0, 0, 0)}&wait=0.1")
    assert reply.status == 404


async def test_rooms_are_answered_known_ones_now_all_with_wait(client: Any) -> None:
    """query_dp_ranks answers the known rooms; with wait, once every room asked is known, or the known ones
    at the deadline. Malformed bodies are a 400."""
    assert (
        await client.post("/register_dp_rank", json={"bootstrap_room": 12345, "dp_rank": 1})
    ).status == 200
    assert await (await client.post("/query_dp_ranks", json={"bootstrap_rooms": [12345, 999]})).json() == {
        "12345": 1
    }
    waiting = asyncio.create_task(
        client.post("/query_dp_ranks?wait=60", json={"bootstrap_rooms": [12345, 999]})
    )
    await until(lambda: _waits(client) >= 1)
    await client.post("/register_dp_rank", json={"bootstrap_room": 999, "dp_rank": 0})
    reply = await asyncio.wait_for(waiting, GUARD)
    assert await reply.json() == {"12345": 1, "999": 0}
    reply = await client.post("/query_dp_ranks?wait=0.1", json={"bootstrap_rooms": [1, 12345]})
    assert await reply.json() == {"12345": 1}
    for path, body in (
        ("/register_dp_rank", {"bootstrap_room": "x", "dp_rank": 0}),
        ("/register_dp_rank", {"dp_rank": 0}),
        ("/query_dp_ranks", {"bootstrap_rooms": 5}),
        ("/query_dp_ranks", {"bootstrap_rooms": [-1]}),
    ):
        reply = await client.post(path, json=body)
        assert reply.status == 400, body
        assert (await reply.json())["detail"]


@pytest.mark.parametrize("config", [ServerConfig(settings=(PrefillSettings(dp_room_ttl=0.2),))])
async def test_rooms_expire_after_their_ttl(client: Any) -> None:
    """A room lives at least --dp-room-ttl and is gone by twice that (the store's lease ends it)."""
    await client.post("/register_dp_rank", json={"bootstrap_room": 7, "dp_rank": 1})
    assert await (await client.post("/query_dp_ranks", json={"bootstrap_rooms": [7]})).json() == {"7": 1}

    # The lease's end is a change: awaited on /watch, not polled.
    version, deleted = 0, False
    async with asyncio.timeout(GUARD):
        while not deleted:
            reply = await (await client.get(f"/watch?after={version}&wait=30")).json()
            version = reply["version"]
            deleted = any(c["kind"] == "prefill_room" and c["op"] == "delete" for c in reply["changes"])
    assert await (await client.post("/query_dp_ranks", json={"bootstrap_rooms": [7]})).json() == {}


async def test_a_rank_on_a_lease_leaves_with_it(client: Any) -> None:
    """ "lease": ID in the PUT body: revoking the lease removes the rank (and the deployment is incomplete)."""
    lease = (await (await client.post("/leases", json={"ttl": 30})).json())["lease"]
    await _register_all(client)
    assert (await client.put("/route", json={**rank_body(1, 1), "lease": lease})).status == 200
    assert (await client.get(f"/route?{ALL}")).status == 200
    assert (await client.delete(f"/leases/{lease}")).status == 200
    reply = await client.get(f"/route?{ALL}")
    assert (reply.status, await reply.text()) == (
        503,
        "Prefill server not fully registered yet (3 workers registered).",
    )


async def test_a_rank_registered_or_gone_is_a_watch_change_naming_its_coordinates(client: Any) -> None:
    await client.put("/route", json=rank_body(1, 0))
    await client.delete(f"/route?{route(0, 0, 1, 0)}")
    history: History = client.app[HISTORY]
    await until(lambda: (history.latest("default") or 0) >= 3)
    changes = (await (await client.get("/watch?after=0")).json())["changes"]
    ranks = [(change["op"], change["key"]) for change in changes if change["kind"] == "prefill_rank"]
    assert ranks == [("put", "dp0-cp0-tp1-pp0"), ("delete", "dp0-cp0-tp1-pp0")]


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
@pytest.mark.parametrize(
    "config",
    [
        ServerConfig(
            auth_tokens=TokenSet(
                {"prefill": Scope(frozenset({"pd"})), "decode": Scope(frozenset({"pd"}), read_only=True)}
            )
        )
    ],
)
async def test_registering_is_a_write_and_asking_a_read(client: Any) -> None:
    """A read-only token may ask /route and /query_dp_ranks, not register a rank or a room."""
    decode, prefill = {"Authorization": "Bearer decode"}, {"Authorization": "Bearer prefill"}
    assert (await client.put("/ns/pd/route", json=rank_body(0, 0), headers=decode)).status == 403
    assert (
        await client.post("/ns/pd/register_dp_rank", json={"bootstrap_room": 1, "dp_rank": 0}, headers=decode)
    ).status == 403
    assert (await client.put("/ns/pd/route", json=rank_body(0, 0), headers=prefill)).status == 200
    assert (await client.get(f"/ns/pd/route?{route(0, 0, 0, 0)}", headers=decode)).status == 503
    assert (
        await client.post("/ns/pd/query_dp_ranks", json={"bootstrap_rooms": [1]}, headers=decode)
    ).status == 200
    assert (await client.get(f"/ns/pd/route?{ALL}")).status == 401


@pytest.mark.parametrize("store_kind", ["redis"], indirect=True)
async def test_across_two_replicas_a_wait_on_one_is_woken_through_the_other(
    client: Any, aiohttp_client: Any, config: ServerConfig
) -> None:
    """Two servers over one Redis: decode parked on A learns the topology the moment the last rank
    registers through B; readiness counts the same ranks on both."""
    other = await aiohttp_client(create_app(dataclasses.replace(config, **_store_of(client.app[CONFIG]))))
    waiting = asyncio.create_task(client.get(f"/ns/pd/route?{ALL}&wait=60"))
    await until(lambda: _waits(client) >= 1)
    for tp, dp in ((0, 0), (1, 0), (0, 1), (1, 1)):
        assert (await other.put("/ns/pd/route", json=rank_body(tp, dp))).status == 200
    reply = await asyncio.wait_for(waiting, GUARD)
    assert reply.status == 200
    assert (await (await other.get(f"/ns/pd/route?{route(1, 0, 1, 0)}")).json())["rank_port"] == 17011


def _store_of(config: ServerConfig) -> dict[str, Any]:
    return {"store": config.store, "store_prefix": config.store_prefix}


@pytest.mark.parametrize("config", [ServerConfig(settings=(PrefillSettings(dp_room_limit=2),))])
async def test_rooms_past_the_limit_are_a_409_and_stored_nowhere(client: Any) -> None:
    """Rooms are bounded per namespace: a new one past the limit is a 409 naming it, an old one may come again."""
    for room in (1, 2):
        assert (
            await client.post("/register_dp_rank", json={"bootstrap_room": room, "dp_rank": 0})
        ).status == 200
    refused = await client.post("/register_dp_rank", json={"bootstrap_room": 3, "dp_rank": 1})
    assert refused.status == 409
    assert (await refused.json())["detail"].startswith(
        "The namespace holds 2 bootstrap rooms, the most it keeps"
    )
    # The same room again replaces itself, and another namespace has its own bound.
    assert (await client.post("/register_dp_rank", json={"bootstrap_room": 2, "dp_rank": 1})).status == 200
    assert (
        await client.post("/ns/other/register_dp_rank", json={"bootstrap_room": 3, "dp_rank": 1})
    ).status == 200
    asked = {"bootstrap_rooms": [1, 2, 3]}
    assert await (await client.post("/query_dp_ranks", json=asked)).json() == {"1": 0, "2": 1}


def test_the_room_limit_is_a_cli_option_and_below_one_is_refused() -> None:
    """--dp-room-limit sets the bound; a limit of no rooms would refuse every registration, so it is refused."""
    assert (
        server_config(server_parser().parse_args(["--dp-room-limit", "64"]), {})
        .settings_of(PrefillSettings)
        .dp_room_limit
        == 64
    )
    assert (
        server_config(server_parser().parse_args([]), {}).settings_of(PrefillSettings).dp_room_limit
        == 1_000_000
    )
    with pytest.raises(ValueError, match="dp room limit must be at least 1 room, not 0"):
        PrefillSettings(dp_room_limit=0)
