"""The engine-info family over HTTP: parallelism config, roles, backend-tagged info, form=object.

Every per-rank kind is one entry of the kind table; these tests drive the real
app through each kind's routes, as SPEC section 7 words them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from aiobootstrap import ServerConfig, _json, create_app
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.server.face_registry import installed_faces
from aiobootstrap.server.faces.engine_info import kinds as _kinds
from aiobootstrap.server.faces.engine_info.face import engine_info_face
from aiobootstrap.server.faces.engine_info.kinds import RecordKind
from aiobootstrap.store import Record
from aiobootstrap.wire.bodies import parse_object

from .helpers.registry import registration
from .helpers.waits import GUARD, until

PC = "/register_parallelism_config"
GET_PC = "/get_parallelism_config"
TEI = "/register_transfer_engine_info"
GET_TEI = "/get_transfer_engine_info"

CONFIG = {"tp_size": 8, "pp_size": 2, "dp_rank": 0, "nested": {"ep": [1, 2]}, "none": None}
NIXL = {
    "backend": "nixl",
    "agent_name": "prefill-0-rank-3",
    "agent_metadata": "bWV0YWRhdGEgYnl0ZXM=",
    "weights_info_dict": {"layer.0": [140234, 4096, 2]},
}


def config_body(rank: Any, config: Any = None, key: str = "rank", **extra: Any) -> dict[str, Any]:
    return {key: rank, "parallelism_config": dict(CONFIG) if config is None else config, **extra}


async def test_parallelism_config_wire(client):
    """PUT answers text OK; GET answers the config exactly as registered, its version in a header."""
    reply = await client.put(PC, json=config_body(3))
    assert reply.status == 200
    assert reply.content_type == "text/plain"
    assert await reply.text() == "OK"
    reply = await client.get(f"{GET_PC}?rank=3")
    assert reply.status == 200
    assert reply.content_type == "application/json"
    assert await reply.json() == CONFIG
    assert reply.headers["X-Aiobootstrap-Version"] == "1"


async def test_parallelism_config_404_and_rank_errors_are_byte_exact(client):
    """Not registered: the SPEC's sentence (with missing, as every rank 404); a bad rank: Invalid rank parameter."""
    reply = await client.get(f"{GET_PC}?rank=5")
    assert reply.status == 404
    assert await reply.read() == b'{"detail":"No parallelism config for rank 5","missing":[5]}'
    reply = await client.get(f"{GET_PC}?rank=-1")
    assert reply.status == 400
    assert await reply.read() == b'{"detail":"Invalid rank parameter"}'


async def test_parallelism_config_takes_tp_rank_and_rank_wins(client):
    """Older bodies send tp_rank; with both, rank wins (rank 0 included)."""
    assert (await client.put(PC, json=config_body(2, {"a": 2}, key="tp_rank"))).status == 200
    assert (await client.put(PC, json={**config_body(0, {"a": 0}), "tp_rank": 7})).status == 200
    assert await (await client.get(f"{GET_PC}?rank=2")).json() == {"a": 2}
    assert await (await client.get(f"{GET_PC}?rank=0")).json() == {"a": 0}
    assert (await client.get(f"{GET_PC}?rank=7")).status == 404


async def test_parallelism_config_waits_and_after(client, registry):
    """wait= holds a get until the rank registers; after= waits for a newer registration."""
    task = asyncio.create_task(client.get(f"{GET_PC}?rank=1&wait={GUARD}"))
    await until(lambda: registry.parked == 1)
    await client.put(PC, json=config_body(1, {"v": 1}))
    reply = await asyncio.wait_for(task, GUARD)
    assert await reply.json() == {"v": 1}
    version = reply.headers["X-Aiobootstrap-Version"]
    task = asyncio.create_task(client.get(f"{GET_PC}?rank=1&wait={GUARD}&after={version}"))
    await until(lambda: registry.parked == 1)
    await client.put(PC, json=config_body(1, {"v": 2}))
    assert await (await asyncio.wait_for(task, GUARD)).json() == {"v": 2}


async def test_parallelism_config_batch(client, registry):
    """The batch get waits for every rank and answers items with rank, config and version."""
    task = asyncio.create_task(client.get(f"{GET_PC}_batch?ranks=0-1&wait={GUARD}"))
    await until(lambda: registry.parked == 1)
    await client.put(PC, json=config_body(1, {"r": 1}))
    await client.put(PC, json=config_body(0, {"r": 0}))
    reply = await asyncio.wait_for(task, GUARD)
    assert reply.status == 200
    assert await reply.json() == {
        "configs": [
            {"rank": 0, "parallelism_config": {"r": 0}, "version": 2},
            {"rank": 1, "parallelism_config": {"r": 1}, "version": 1},
        ],
        "version": 2,
    }
    reply = await client.get(f"{GET_PC}_batch?ranks=0-3")
    assert reply.status == 404
    assert await reply.json() == {
        "detail": "No parallelism config for ranks 2-3",
        "missing": [2, 3],
        "missing_ranks": "2-3",
    }


async def test_parallelism_config_delete(client):
    """DELETE on the register route removes one role's rank; a second DELETE is a 404."""
    await client.put(PC, json=config_body(4))
    await client.put(PC, json=config_body(4, role="draft"))
    assert await (await client.delete(f"{PC}?rank=4")).text() == "OK"
    reply = await client.delete(f"{PC}?rank=4")
    assert reply.status == 404
    assert await reply.json() == {"detail": "No parallelism config for rank 4", "missing": [4]}
    assert (await client.get(f"{GET_PC}?rank=4&role=draft")).status == 200


# -- roles ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["transfer_engine_info", "parallelism_config"])
async def test_roles_are_kept_apart_both_ways(client, registry, kind):
    """A draft waiter is answered by the draft's registration only, a target waiter by the target's."""

    def body(role: str) -> dict[str, Any]:
        if kind == "parallelism_config":
            return config_body(0, {"who": role}, role=role)
        return {**registration(0, session_id=role), "role": role}

    register, get = (PC, GET_PC) if kind == "parallelism_config" else (TEI, GET_TEI)
    draft = asyncio.create_task(client.get(f"{get}?rank=0&role=draft&wait={GUARD}"))
    target = asyncio.create_task(client.get(f"{get}?rank=0&wait={GUARD}"))
    await until(lambda: registry.parked == 2)
    # The target registers first: had it woken the draft's waiter, that waiter would answer the target's value.
    await client.put(register, json=body("target"))
    target_reply = await asyncio.wait_for(target, GUARD)
    await until(lambda: registry.parked == 1)
    assert not draft.done()
    await client.put(register, json=body("draft"))
    draft_reply = await asyncio.wait_for(draft, GUARD)
    if kind == "parallelism_config":
        assert await target_reply.json() == {"who": "target"}
        assert await draft_reply.json() == {"who": "draft"}
    else:
        assert (await target_reply.json())["remote_instance_transfer_engine_info"][0] == "target"
        assert (await draft_reply.json())["remote_instance_transfer_engine_info"][0] == "draft"


async def test_a_draft_registration_never_replaces_the_target(client):
    """Each (role, rank) is its own record; a get without role reads target."""
    await client.put(TEI, json=registration(0, "target-s"))
    await client.put(TEI, json={**registration(0, "draft-s"), "role": "draft"})
    body = await (await client.get(f"{GET_TEI}?rank=0")).json()
    assert body["remote_instance_transfer_engine_info"][0] == "target-s"
    body = await (await client.get(f"{GET_TEI}?rank=0&role=draft")).json()
    assert body["remote_instance_transfer_engine_info"][0] == "draft-s"
    assert (await client.get(f"{GET_TEI}?rank=0&role=other")).status == 404


# -- backend-tagged info and form=object ----------------------------------


async def test_nixl_info_is_served_whole(client):
    """A NIXL-tagged registration (no session_id) is stored and served as the object it was."""
    reply = await client.put(TEI, json={"rank": 3, "transfer_engine_info": NIXL})
    assert reply.status == 200
    body = await (await client.get(f"{GET_TEI}?rank=3")).json()
    assert body == {"rank": 3, "remote_instance_transfer_engine_info": NIXL, "version": 1}
    batch = await (await client.get("/get_transfer_engine_info_batch?ranks=3")).json()
    assert batch["infos"] == [body]


async def test_mooncake_tagged_info_is_served_whole_as_the_tagging_loader_reads_it(client):
    """backend mooncake is tagged like any other: served as the object, which the fork's loader reads with .get."""
    info = {"backend": "mooncake", "session_id": "10.0.0.7:18000", "weights_info_dict": {"w": 1}}
    assert (await client.put(TEI, json={"rank": 0, "transfer_engine_info": info})).status == 200
    body = await (await client.get(f"{GET_TEI}?rank=0")).json()
    served = body["remote_instance_transfer_engine_info"]
    assert served == info
    assert (served.get("session_id"), served.get("weights_info_dict")) == ("10.0.0.7:18000", {"w": 1})
    # Tagged, nothing else is checked: a mooncake record without a session id is kept as sent.
    bare = {"backend": "mooncake", "weights_info_dict": {}}
    assert (await client.put(TEI, json={"rank": 1, "transfer_engine_info": bare})).status == 200
    body = await (await client.get(f"{GET_TEI}?rank=1")).json()
    assert body["remote_instance_transfer_engine_info"] == bare


async def test_form_object_returns_every_field_sent(client):
    """No field a rank sent is dropped: form=object serves a classic registration whole, extras included."""
    info = {"session_id": "s", "weights_info_dict": {}, "ib_device": "mlx5_0", "extra": {"n": [1]}}
    await client.put(TEI, json={"rank": 1, "transfer_engine_info": info})
    classic = await (await client.get(f"{GET_TEI}?rank=1")).json()
    assert classic["remote_instance_transfer_engine_info"] == ["s", {}]
    whole = await (await client.get(f"{GET_TEI}?rank=1&form=object")).json()
    assert whole == {"rank": 1, "remote_instance_transfer_engine_info": info, "version": 1}
    batch = await (await client.get("/get_transfer_engine_info_batch?ranks=1&form=object")).json()
    assert batch["infos"] == [whole]
    await client.put(PC, json=config_body(1))
    assert await (await client.get(f"{GET_PC}?rank=1&form=object")).json() == CONFIG
    reply = await client.get(f"{GET_TEI}?rank=1&form=tuple")
    assert reply.status == 400
    assert "form" in (await reply.json())["detail"]


# -- bad input ----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (PC, {"rank": 0, "parallelism_config": [1, 2]}, "parallelism_config"),
        (PC, {"rank": 0, "parallelism_config": "tp=8"}, "parallelism_config"),
        (PC, {"rank": 0}, "parallelism_config"),
        (PC, {"rank": 0, "parallelism_config": {}, "role": ""}, "role"),
        (PC, {"rank": 0, "parallelism_config": {}, "role": 7}, "role"),
        (PC, {"parallelism_config": {}}, "rank"),
        (TEI, {**registration(0), "role": ""}, "role"),
        (TEI, {"rank": 0, "transfer_engine_info": {"backend": "", "agent_name": "a"}}, "backend"),
        (TEI, {"rank": 0, "transfer_engine_info": {"backend": 3}}, "backend"),
        (TEI, {"rank": 0, "transfer_engine_info": {"weights_info_dict": {}}}, "session_id"),
    ],
)
async def test_bad_register_bodies_name_the_field_and_store_nothing(client, registry, path, body, field):
    """Each malformed body is a 400 whose detail names the field; nothing is stored."""
    reply = await client.put(path, json=body)
    assert reply.status == 400
    assert field in (await reply.json())["detail"]
    assert await registry.store.version("default") == 0


@pytest.mark.parametrize("path", [PC, TEI, "/register_encoder_url"])
async def test_a_body_that_is_not_json_is_a_400(client, registry, path):
    """Not JSON: 400 saying so, nothing stored, whatever the route."""
    method = client.post if path == "/register_encoder_url" else client.put
    reply = await method(path, data=b"{nope")
    assert reply.status == 400
    assert await reply.json() == {"detail": "The request body is not valid JSON."}
    assert await registry.store.version("default") == 0


@pytest.mark.parametrize("path", [f"{GET_PC}?rank=0&role=", f"{GET_TEI}?rank=0&role=", "/ranks?role="])
async def test_an_empty_role_parameter_is_a_400(client, path):
    """role= must name a role."""
    reply = await client.get(path)
    assert reply.status == 400
    assert "role" in (await reply.json())["detail"]


# -- one rank rule --------------------------------------------------------

RANKS = [
    (0, True),
    (7, True),
    (10**18 - 1, True),
    (10**18, False),
    (2**63, False),
    (10**30, False),
    (-1, False),
]


@pytest.mark.parametrize(("rank", "accepted"), RANKS, ids=[str(rank) for rank, _ in RANKS])
async def test_every_route_accepts_and_refuses_the_same_ranks(client, rank, accepted):
    """A rank is accepted by every route or refused by every route: none is stored that a get refuses."""
    statuses = {
        "put info": (await client.put(TEI, json=registration(rank))).status,
        "put config": (await client.put(PC, json=config_body(rank))).status,
        "get info": (await client.get(f"{GET_TEI}?rank={rank}")).status,
        "get config": (await client.get(f"{GET_PC}?rank={rank}")).status,
        "batch info": (await client.get(f"/get_transfer_engine_info_batch?ranks={rank}")).status,
        "batch config": (await client.get(f"{GET_PC}_batch?ranks={rank}")).status,
        "delete info": (await client.delete(f"{TEI}?rank={rank}")).status,
        "delete config": (await client.delete(f"{PC}?rank={rank}")).status,
    }
    if accepted:
        assert set(statuses.values()) == {200}, statuses
    else:
        assert set(statuses.values()) == {400}, statuses


@pytest.mark.parametrize("rank", [True, 1.0, "3", None, [1]])
async def test_body_ranks_that_are_not_integers_are_refused(client, rank):
    """A JSON true, a float, a string or a list is not a rank, for either kind."""
    for path, body in ((TEI, registration(rank)), (PC, config_body(rank))):
        reply = await client.put(path, json=body)
        assert reply.status == 400
        assert "rank" in (await reply.json())["detail"]


# -- namespaces, listing, restart ---------------------------------------


async def test_each_kind_in_a_namespace(client):
    """Every kind's routes have /ns/{name} twins, each namespace apart."""
    await client.put(f"/ns/blue{PC}", json=config_body(0, {"ns": "blue"}))
    await client.put(f"/ns/blue{TEI}", json={"rank": 0, "transfer_engine_info": NIXL})
    await client.post("/ns/blue/register_encoder_url", json={"url": "http://blue:1"})
    assert await (await client.get(f"/ns/blue{GET_PC}?rank=0")).json() == {"ns": "blue"}
    assert (await client.get(f"{GET_PC}?rank=0")).status == 404
    body = await (await client.get(f"/ns/blue{GET_TEI}?rank=0")).json()
    assert body["remote_instance_transfer_engine_info"] == NIXL
    assert (await (await client.get("/ns/blue/list_encoder_urls")).json())["encoder_urls"] == [
        "http://blue:1"
    ]
    assert (await (await client.get("/list_encoder_urls")).json())["encoder_urls"] == []


async def test_the_listing_shows_kind_and_role(client):
    """/ranks keeps its shape (transfer-engine info, target) and lists any kind and role on request."""
    await client.put(TEI, json=registration(0, "s0"))
    await client.put(TEI, json={"rank": 1, "transfer_engine_info": NIXL, "role": "draft"})
    await client.put(PC, json=config_body(2, role="draft"))
    default = await (await client.get("/ranks")).json()
    assert (default["kind"], default["role"], default["count"]) == ("transfer_engine_info", "target", 1)
    assert default["ranks"][0]["session_id"] == "s0"
    draft = await (await client.get("/ranks?role=draft")).json()
    assert draft["ranks"][0]["rank"] == 1
    assert draft["ranks"][0]["backend"] == "nixl"
    configs = await (await client.get("/ranks?kind=parallelism_config&role=draft")).json()
    assert (configs["kind"], configs["role"], [r["rank"] for r in configs["ranks"]]) == (
        "parallelism_config",
        "draft",
        [2],
    )
    reply = await client.get("/ranks?kind=weights")
    assert reply.status == 400
    assert "kind" in (await reply.json())["detail"]


async def test_every_kind_survives_a_restart_with_a_state_file(aiohttp_client, tmp_path: Path):
    """A new app on the same state file serves every kind, role and namespace as before."""
    path = tmp_path / "state"
    first = await aiohttp_client(create_app(ServerConfig(state_file=str(path))))
    await first.put(PC, json=config_body(1, role="draft"))
    await first.put(f"/ns/blue{PC}", json=config_body(0, {"blue": True}))
    await first.put(TEI, json={"rank": 2, "transfer_engine_info": NIXL})
    for url in ("http://e1", "http://e2", "http://e3"):
        await first.post("/register_encoder_url", json={"url": url})
    await first.delete("/unregister_encoder_url", json={"url": "http://e2"})
    reads = (
        f"{GET_PC}?rank=1&role=draft",
        f"/ns/blue{GET_PC}?rank=0",
        f"{GET_TEI}?rank=2",
        "/list_encoder_urls",
    )
    before = [await (await first.get(read)).read() for read in reads]
    await first.close()

    second = await aiohttp_client(create_app(ServerConfig(state_file=str(path))))
    after = [await (await second.get(read)).read() for read in reads]
    assert after == before
    assert (await second.app[REGISTRY].store.version("default")) >= 6
    assert (await (await second.get("/list_encoder_urls")).json())["encoder_urls"] == [
        "http://e1",
        "http://e3",
    ]


# -- metrics ------------------------------------------------------------


async def test_metrics_count_registrations_by_kind_and_encoder_urls(client):
    """A scrape shows registrations by namespace and kind, and the encoder URLs listed."""
    await client.put(PC, json=config_body(0))
    await client.put(TEI, json=registration(0))
    await client.post("/register_encoder_url", json={"url": "http://e"})
    text = await (await client.get("/metrics")).text()
    assert 'aiobootstrap_kind_registrations_total{kind="parallelism_config",namespace="default"} 1.0' in text
    assert (
        'aiobootstrap_kind_registrations_total{kind="transfer_engine_info",namespace="default"} 1.0' in text
    )
    assert 'aiobootstrap_kind_registrations_total{kind="encoder_urls",namespace="default"} 1.0' in text
    assert 'aiobootstrap_encoder_urls{namespace="default"} 1.0' in text
    assert 'route="/get_parallelism_config"' not in text  # not asked yet
    await client.get(f"{GET_PC}?rank=0")
    text = await (await client.get("/metrics")).text()
    assert 'route="/get_parallelism_config"' in text


# -- a fourth kind is a table entry -------------------------------------


def _layout_reply(record: Record) -> bytes:
    return _json.dumps({"rank": record.rank, "layout": record.value, "version": record.version})


LAYOUT = RecordKind(
    name="kv_layout",
    noun="KV cache layout",
    field="kv_layout",
    register_path="/register_kv_layout",
    get_path="/get_kv_layout",
    batch_path="/get_kv_layout_batch",
    batch_field="layouts",
    title="KvLayout",
    parse=lambda value: parse_object(value, "kv_layout"),
    encode=_layout_reply,
    encode_object=_layout_reply,
    item=lambda record, reply: reply,
    summary=lambda record: {"blocks": record.value.get("blocks")},
    value_schema={"type": "object"},
    reply_schema={"type": "object"},
)


async def test_a_fourth_kind_is_one_table_entry(aiohttp_client, monkeypatch, tmp_path: Path):
    """A kind added to the table alone (the engine-info face made from it) gets every route, wait, batch,
    roles, listing, journal and OpenAPI."""
    monkeypatch.setattr(_kinds, "KINDS", (*_kinds.KINDS, LAYOUT))
    # The engine-info face as the table is now: it declares the table's kinds (Face.kinds) when made.
    faces = [engine_info_face() if face.name == "engine_info" else face for face in installed_faces()]
    path = tmp_path / "state"
    client = await aiohttp_client(create_app(ServerConfig(state_file=str(path)), faces=faces))
    registry = client.app[REGISTRY]
    task = asyncio.create_task(client.get(f"/ns/blue/get_kv_layout_batch?ranks=0-1&role=draft&wait={GUARD}"))
    await until(lambda: registry.parked == 1)
    for rank in (0, 1):
        body = {"tp_rank": rank, "role": "draft", "kv_layout": {"blocks": 16 + rank}}
        assert await (await client.put("/ns/blue/register_kv_layout", json=body)).text() == "OK"
    batch = await (await asyncio.wait_for(task, GUARD)).json()
    assert [item["layout"] for item in batch["layouts"]] == [{"blocks": 16}, {"blocks": 17}]
    reply = await client.get("/ns/blue/get_kv_layout?rank=5&role=draft")
    assert (await reply.json())["detail"] == "No KV cache layout for rank 5"
    listing = await (await client.get("/ns/blue/ranks?kind=kv_layout&role=draft")).json()
    assert [item["blocks"] for item in listing["ranks"]] == [16, 17]
    assert (await client.put("/register_kv_layout", json={"rank": 0, "kv_layout": 3})).status == 400
    doc = await (await client.get("/openapi.json")).json()
    assert "put" in doc["paths"]["/ns/{namespace}/register_kv_layout"]
    assert "KvLayoutBatch" in doc["components"]["schemas"]
    await client.close()

    again = await aiohttp_client(create_app(ServerConfig(state_file=str(path)), faces=faces))
    reply = await again.get("/ns/blue/get_kv_layout?rank=1&role=draft")
    assert (await reply.json())["layout"] == {"blocks": 17}


async def test_log_lines_name_kind_role_and_backend(client, caplog):
    """A registration's line names its kind, role and backend when they are not the defaults."""
    caplog.set_level("INFO", logger="aiobootstrap")
    await client.put(TEI, json={"rank": 3, "transfer_engine_info": NIXL, "role": "draft"})
    await client.put(PC, json=config_body(1))
    lines = [record.getMessage() for record in caplog.records if "registered" in record.getMessage()]
    assert lines == [
        "registered rank 3 role draft backend nixl version 1",
        "registered parallelism config rank 1 version 2",
    ]
