"""The HTTP app through aiohttp's test client: the wire protocol of SPEC §1-§3."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from aiobootstrap import Registry, ServerConfig

from .helpers.registry import registration, stored_count
from .helpers.waits import GUARD, until

Client = TestClient[web.Request, web.Application]

REGISTER = "/register_transfer_engine_info"
GET = "/get_transfer_engine_info"
BATCH = "/get_transfer_engine_info_batch"


async def put(client: Client, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    async with client.put(REGISTER, data=data) as response:
        text = await response.text()
        return response.status, text if response.content_type == "text/plain" else json.loads(text)


async def get(client: Client, path: str = GET, **params: Any) -> tuple[int, Any]:
    async with client.get(path, params={k: str(v) for k, v in params.items()}) as response:
        assert response.content_type == "application/json"
        return response.status, await response.json()


async def listing(client: Client) -> Any:
    async with client.get("/ranks") as response:
        return await response.json()


# -- SPEC §1: the wire protocol -----------------------------------------


async def test_health_answers_plain_ok(client: Client) -> None:
    """GET /health is 200 text/plain OK."""
    async with client.get("/health") as response:
        assert response.status == 200
        assert response.content_type == "text/plain"
        assert await response.text() == "OK"


async def test_register_then_get_round_trip(client: Client) -> None:
    """A registration answers plain OK and a get returns the list form existing readers index."""
    status, body = await put(client, registration(3, "10.0.0.7:18000", {"layer.0": [1, 2]}))
    assert (status, body) == (200, "OK")
    status, info = await get(client, rank=3)
    assert status == 200
    assert info == {
        "rank": 3,
        "remote_instance_transfer_engine_info": ["10.0.0.7:18000", {"layer.0": [1, 2]}],
        "version": 1,
    }
    assert info["remote_instance_transfer_engine_info"][0] == "10.0.0.7:18000"


async def test_legacy_tp_rank_registers(client: Client) -> None:
    """Older clients send tp_rank instead of rank."""
    assert (await put(client, registration(2, key="tp_rank")))[0] == 200
    assert (await get(client, rank=2))[0] == 200


async def test_rank_wins_over_tp_rank_even_when_zero(client: Client) -> None:
    """With both present, rank wins, and rank 0 is a rank like any other."""
    body = registration(0)
    body["tp_rank"] = 5
    assert (await put(client, body))[0] == 200
    assert (await get(client, rank=0))[0] == 200
    assert (await get(client, rank=5))[0] == 404


async def test_unregistered_rank_is_404_with_the_usual_detail(client: Client) -> None:
    """A rank nobody registered is 404 {"detail": "No transfer engine info for rank N", "missing": [N]}."""
    assert await get(client, rank=9) == (
        404,
        {"detail": "No transfer engine info for rank 9", "missing": [9]},
    )


async def test_versions_strictly_increase_with_every_registration(client: Client) -> None:
    """version is server-wide and grows with every registration, re-registrations included."""
    versions = []
    for rank in (0, 1, 0, 2):
        await put(client, registration(rank))
        versions.append((await get(client, rank=rank))[1]["version"])
    assert versions == [1, 2, 3, 4]


async def test_reregistration_replaces_the_info(client: Client) -> None:
    """Registering a rank again replaces what a get returns."""
    await put(client, registration(1, "old"))
    await put(client, registration(1, "new", {"x": 1}))
    info = (await get(client, rank=1))[1]
    assert info["remote_instance_transfer_engine_info"] == ["new", {"x": 1}]


BAD_BODIES = [
    pytest.param(b"{not json", "not valid JSON", id="not-json"),
    pytest.param(b"", "not valid JSON", id="empty"),
    pytest.param(b"\xff\xfe", "not valid JSON", id="not-utf8"),
    pytest.param([registration(1)], "JSON object", id="array"),
    pytest.param("3", "JSON object", id="number"),
    pytest.param(
        {"transfer_engine_info": {"session_id": "s", "weights_info_dict": {}}}, "rank", id="no-rank"
    ),
    pytest.param(registration(True), "rank", id="rank-true"),
    pytest.param(registration(-1), "rank", id="rank-negative"),
    pytest.param(registration("3"), "rank", id="rank-string"),
    pytest.param(registration(1.0), "rank", id="rank-float"),
    pytest.param(registration(None), "rank", id="rank-null"),
    pytest.param(registration(True, key="tp_rank"), "rank", id="tp-rank-true"),
    pytest.param({"rank": 1}, "transfer_engine_info", id="no-info"),
    pytest.param({"rank": 1, "transfer_engine_info": ["s", {}]}, "transfer_engine_info", id="info-array"),
    pytest.param(registration(1, session_id=7), "session_id", id="session-not-string"),
    pytest.param(registration(1, session_id=None), "session_id", id="session-null"),
    pytest.param(
        {"rank": 1, "transfer_engine_info": {"weights_info_dict": {}}}, "session_id", id="no-session"
    ),
    pytest.param(registration(1, weights=[1, 2]), "weights_info_dict", id="weights-array"),
    pytest.param(
        {"rank": 1, "transfer_engine_info": {"session_id": "s"}}, "weights_info_dict", id="no-weights"
    ),
    pytest.param(
        b'{"rank": 1, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {"x": NaN}}}',
        "not valid JSON",
        id="nan",
    ),
    pytest.param(b"[" * 100_000, "not valid JSON", id="deep-nesting"),
]


@pytest.mark.parametrize(("body", "named"), BAD_BODIES)
async def test_bad_register_body_is_400_naming_the_field_and_changes_nothing(
    client: Client, body: Any, named: str
) -> None:
    """Each malformed registration is a 400 whose detail names the field; what was stored stays."""
    await put(client, registration(1, "kept", {"k": 1}))
    before = await get(client, rank=1)
    status, reply = await put(client, body)
    assert status == 400
    assert named in reply["detail"]
    assert reply["detail"].endswith(".")
    assert await get(client, rank=1) == before
    assert (await listing(client))["count"] == 1


BAD_RANK_PARAMS = [
    pytest.param({}, "Missing rank parameter", id="missing"),
    pytest.param({"rank": "-1"}, "Invalid rank parameter", id="negative"),
    pytest.param({"rank": "abc"}, "Invalid rank parameter", id="word"),
    pytest.param({"rank": "1.5"}, "Invalid rank parameter", id="float"),
    pytest.param({"rank": ""}, "Invalid rank parameter", id="empty"),
    pytest.param({"rank": "true"}, "Invalid rank parameter", id="true"),
    pytest.param({"rank": "9" * 5000}, "Invalid rank parameter", id="huge"),
]


@pytest.mark.parametrize(("params", "detail"), BAD_RANK_PARAMS)
async def test_bad_rank_parameter_is_400(client: Client, params: dict[str, str], detail: str) -> None:
    """A missing, negative or non-integer rank is a 400 with the usual detail."""
    assert await get(client, **params) == (400, {"detail": detail})


async def test_repeated_rank_parameter_is_400(client: Client) -> None:
    """rank=1&rank=2 is ambiguous and refused rather than guessed."""
    async with client.get(GET + "?rank=1&rank=2") as response:
        assert response.status == 400
        assert "more than once" in (await response.json())["detail"]


async def test_unknown_route_and_wrong_method_are_json(client: Client) -> None:
    """Even the router's own errors are JSON with a detail, never an HTML page."""
    assert (await get(client, "/nope"))[0] == 404
    async with client.post("/health") as response:
        assert response.status == 405
        assert "detail" in await response.json()


async def test_body_over_the_limit_is_413_and_changes_nothing(aiohttp_client: Any) -> None:
    """A registration larger than --max-body-size is a 413 with a detail naming the limit."""
    from aiobootstrap import create_app

    client = await aiohttp_client(create_app(ServerConfig(max_body_size=200)))
    status, reply = await put(client, registration(1, weights={"x": "y" * 500}))
    assert status == 413
    assert "200 bytes" in reply["detail"]
    assert (await get(client, rank=1))[0] == 404


# -- SPEC §2: waiting ----------------------------------------------------


async def test_waiting_get_returns_when_the_rank_registers(client: Client, registry: Registry) -> None:
    """GET ...&wait=S parks until the rank registers, then answers 200 at once."""
    waiter = asyncio.create_task(get(client, rank=4, wait=GUARD))
    await until(lambda: registry.parked == 1)
    await put(client, registration(4, "late"))
    status, info = await asyncio.wait_for(waiter, GUARD)
    assert status == 200
    assert info["remote_instance_transfer_engine_info"][0] == "late"


async def test_wait_that_runs_out_is_the_usual_404(client: Client, registry: Registry) -> None:
    """When S passes first, the reply is the same 404 an old retry loop expects."""
    expected = {"detail": "No transfer engine info for rank 4", "missing": [4]}
    assert await get(client, rank=4, wait=0.05) == (404, expected)
    assert (registry.parked, registry.waiting_keys) == (0, 0)


async def test_wait_zero_answers_at_once(client: Client, registry: Registry) -> None:
    """wait=0 means don't wait."""
    assert (await get(client, rank=4, wait=0))[0] == 404
    assert registry.parked == 0


@pytest.mark.parametrize("wait", ["-1", "nan", "NaN", "inf", "-inf", "abc", "", "1e400"])
async def test_bad_wait_is_400(client: Client, wait: str) -> None:
    """A negative, NaN, infinite or non-numeric wait is a 400 naming wait."""
    status, reply = await get(client, rank=1, wait=wait)
    assert status == 400
    assert "wait" in reply["detail"]


@pytest.mark.parametrize("config", [ServerConfig(max_wait=0.05)])
async def test_wait_is_clamped_to_max_wait(client: Client, registry: Registry) -> None:
    """A wait longer than --max-wait is cut to it: the 404 comes after max-wait, not after S."""
    status, _ = await asyncio.wait_for(get(client, rank=1, wait=3600), GUARD)
    assert status == 404
    assert registry.parked == 0


async def test_after_waits_for_a_newer_registration(client: Client, registry: Registry) -> None:
    """after=V skips the registration of version V and returns the restarted worker's new info."""
    await put(client, registration(2, "before restart"))
    version = (await get(client, rank=2))[1]["version"]
    assert (await get(client, rank=2, after=version - 1))[0] == 200
    waiter = asyncio.create_task(get(client, rank=2, wait=GUARD, after=version))
    await until(lambda: registry.parked == 1)
    await put(client, registration(2, "after restart"))
    status, info = await asyncio.wait_for(waiter, GUARD)
    assert status == 200
    assert info["version"] > version
    assert info["remote_instance_transfer_engine_info"][0] == "after restart"


@pytest.mark.parametrize("after", ["-1", "x", "1.5"])
async def test_bad_after_is_400(client: Client, after: str) -> None:
    """after must be a non-negative integer version."""
    status, reply = await get(client, rank=1, after=after)
    assert status == 400
    assert "after" in reply["detail"]


async def test_many_waiters_on_one_rank_all_wake(client: Client, registry: Registry) -> None:
    """One registration answers every getter parked on the rank, with the same info."""
    waiters = [asyncio.create_task(get(client, rank=0, wait=GUARD)) for _ in range(50)]
    await until(lambda: registry.parked == 50)
    await put(client, registration(0, "s0"))
    replies = await asyncio.wait_for(asyncio.gather(*waiters), GUARD)
    assert {json.dumps(reply) for reply in replies} == {json.dumps(replies[0])}
    assert replies[0][0] == 200


async def test_client_hanging_up_removes_its_waiter(client: Client, registry: Registry) -> None:
    """A getter that disconnects mid-wait leaves no parked wait or waitlist behind."""
    waiter = asyncio.create_task(get(client, rank=8, wait=GUARD))
    await until(lambda: registry.parked == 1)
    waiter.cancel()
    await until(lambda: registry.parked == 0 and registry.waiting_keys == 0)


# -- the batch route ----------------------------------------------------


async def test_batch_returns_every_rank_in_order(client: Client) -> None:
    """A batch get answers each rank's usual get reply, in ascending rank order whatever the order asked."""
    for rank in (0, 1, 2, 5):
        await put(client, registration(rank, f"s{rank}"))
    status, reply = await get(client, BATCH, ranks="5,0-2,1")
    assert status == 200
    assert [info["rank"] for info in reply["infos"]] == [0, 1, 2, 5]
    assert reply["infos"][3] == (await get(client, rank=5))[1]
    assert reply["version"] == 4


async def test_batch_names_the_missing_ranks_on_timeout(client: Client) -> None:
    """On timeout the batch is a 404 whose detail and missing list name exactly the absent ranks."""
    await put(client, registration(1))
    status, reply = await get(client, BATCH, ranks="0-3", wait=0.05)
    assert status == 404
    assert reply == {
        "detail": "No transfer engine info for ranks 0,2-3",
        "missing": [0, 2, 3],
        "missing_ranks": "0,2-3",
    }


async def test_batch_waits_for_the_last_rank(client: Client, registry: Registry) -> None:
    """A waiting batch answers once every rank has registered, as one parked request."""
    waiter = asyncio.create_task(get(client, BATCH, ranks="0-63", wait=GUARD))
    await until(lambda: registry.parked == 1)
    for rank in range(64):
        await put(client, registration(rank))
    status, reply = await asyncio.wait_for(waiter, GUARD)
    assert status == 200
    assert len(reply["infos"]) == 64


async def test_batch_of_4096_ranks_fits_one_request(client: Client) -> None:
    """A range keeps a deployment-sized gather inside one request line."""
    status, reply = await get(client, BATCH, ranks="0-4095")
    assert status == 404
    assert reply["missing"] == list(range(1024))
    assert reply["missing_truncated"] is True
    assert reply["missing_ranks"] == "0-4095"
    assert reply["detail"] == "No transfer engine info for ranks 0-4095"


@pytest.mark.parametrize("ranks", ["", "a", "3-1", "-1", "1,,2", "0-99999999999", "1-"])
async def test_bad_batch_ranks_is_400(client: Client, ranks: str) -> None:
    """An unreadable rank set is a 400 naming the ranks parameter."""
    status, reply = await get(client, BATCH, ranks=ranks)
    assert status == 400
    assert "ranks" in reply["detail"]


# -- SPEC §3: knowing the deployment ------------------------------------


@pytest.mark.parametrize("config", [ServerConfig(world_size=8)])
async def test_world_size_refuses_ranks_outside_it(client: Client, registry: Registry) -> None:
    """With --world-size, a register or get outside [0, W) is a 400 naming both numbers."""
    status, reply = await put(client, registration(8))
    assert status == 400
    assert "8" in reply["detail"]
    assert "world size 8" in reply["detail"]
    status, reply = await get(client, rank=9, wait=GUARD)
    assert status == 400
    assert "Rank 9" in reply["detail"]
    assert "world size 8" in reply["detail"]
    assert (await get(client, BATCH, ranks="0-8"))[0] == 400
    assert await stored_count(registry) == 0
    assert (await put(client, registration(7)))[0] == 200


@pytest.mark.parametrize("config", [ServerConfig(world_size=4)])
async def test_listing_shows_registered_and_missing_ranks(client: Client) -> None:
    """/ranks lists rank, session id, version and age, never the weights; and the missing ranks."""
    await put(client, registration(2, "s2", {"big": "x" * 100}))
    await put(client, registration(0, "s0"))
    reply = await listing(client)
    assert [(item["rank"], item["session_id"], item["version"]) for item in reply["ranks"]] == [
        (0, "s0", 2),
        (2, "s2", 1),
    ]
    assert all(item["age"] >= 0 and item["registered_at"] > 0 for item in reply["ranks"])
    assert "big" not in json.dumps(reply)
    assert reply["missing"] == [1, 3]
    assert (reply["world_size"], reply["count"], reply["version"]) == (4, 2, 2)
