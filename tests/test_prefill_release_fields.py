"""SGLang 0.5.23's prefill fields (issue 40, SPEC section 13 as amended): the parallel info carries back every
deployment-wide field the prefill side sent beyond those the server reads, under its name, with its value
(``null`` left out), and none it did not send; the first rank to send a field fixes it; a later rank with
another ``decode_allocation_policy`` or ``dsv41_spec_layout`` is refused with SGLang's sentence, any other
difference keeps the first value with a WARNING. Over the memory store and Redis (``client``), and through
two replicas over Redis and over etcd. SGLang's released decode reading these replies is in
``compat/``."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.faces.prefill import deployment
from aiobootstrap.wire.prefill_fields import differing
from testbed.etcd_server import Cluster, unique_prefix

from .helpers.prefill import ALL, rank_body

LAYOUT = {
    "num_draft_tokens": 4,
    "compression_ratios": [1, 2],
    "kv_layer_ids": [0, 1],
    "kv_item_lens": [576, 576],
    "state_types": ["swa", "swa"],
    "state_item_lens": [[64], [64]],
}
"""A ``dsv41_spec_layout`` of the shape SGLang 0.5.23's ``get_dsv41_spec_layout`` makes."""
RELEASE_FIELDS: dict[str, Any] = {
    "enable_dsa_cache_layer_split": True,
    "dsv41_spec_layout": LAYOUT,
    "kv_layout": "page_major",
    "decode_allocation_policy": "prefill_complete",
    "enable_kv_cache_sharding": True,
    "prefill_http_port": 30000,
}
"""What SGLang 0.5.23's ``register_to_bootstrap`` adds to the mid-2026 body, in its reply's order (none left
at its default, so a decode that dropped one would be seen running on the default)."""
BASE_KEYS = [
    "attn_tp_size",
    "attn_cp_size",
    "dp_size",
    "pp_size",
    "page_size",
    "kv_cache_dtype",
    "follow_bootstrap_room",
]
NULL_KEYS = [
    "target_tp_rank",
    "target_tp_ranks",
    "target_cp_ranks",
    "target_pp_ranks",
    "required_dst_info_num",
    "required_prefill_response_num",
]


def body(tp: int, **fields: Any) -> dict[str, Any]:
    """Rank ``tp`` of a deployment of two tp ranks, with ``fields`` added to the mid-2026 body."""
    return rank_body(tp, 0, tp_size=2, dp_size=1, **fields)


async def _info(client: Any) -> dict[str, Any]:
    reply = await client.get(f"/route?{ALL}")
    assert reply.status == 200, await reply.text()
    info: dict[str, Any] = json.loads(await reply.read())
    return info


async def _register(client: Any, *bodies: dict[str, Any]) -> None:
    for sent in bodies:
        reply = await client.put("/route", json=sent)
        assert (reply.status, await reply.text()) == (200, "OK")


async def test_the_release_body_registers_and_gets_every_field_back(client: Any) -> None:
    """Two ranks with 0.5.23's body: the parallel info carries each of its six fields, with its value, in
    SGLang's reply's order, between the topology and the keys decode fills."""
    await _register(client, body(0, **RELEASE_FIELDS), body(1, **RELEASE_FIELDS))
    info = await _info(client)
    assert list(info) == [*BASE_KEYS, *RELEASE_FIELDS, *NULL_KEYS]
    assert {name: info[name] for name in RELEASE_FIELDS} == RELEASE_FIELDS
    assert (info["attn_tp_size"], info["dp_size"], info["follow_bootstrap_room"]) == (2, 1, False)
    listed = (await (await client.get("/prefill")).json())["topology"]
    assert listed["fields"] == RELEASE_FIELDS  # what the page and status read


@pytest.mark.parametrize("name", list(RELEASE_FIELDS))
async def test_each_release_field_comes_back_alone(client: Any, name: str) -> None:
    """Each field, sent alone beside the mid-2026 body, is the one key the reply adds."""
    field = {name: RELEASE_FIELDS[name]}
    await _register(client, body(0, **field), body(1, **field))
    info = await _info(client)
    assert list(info) == [*BASE_KEYS, name, *NULL_KEYS]
    assert info[name] == RELEASE_FIELDS[name]


async def test_a_mid_2026_body_gets_a_reply_without_them(client: Any) -> None:
    """Without the new fields, none comes back (an older decode builds its dataclass from every key)."""
    await _register(client, body(0), body(1))
    assert list(await _info(client)) == [*BASE_KEYS, *NULL_KEYS]


async def test_null_fields_are_left_out(client: Any) -> None:
    """SGLang sends kv_layout and dsv41_spec_layout as null on most models: left out, as its server does."""
    sent = {**RELEASE_FIELDS, "kv_layout": None, "dsv41_spec_layout": None, "prefill_http_port": None}
    await _register(client, body(0, **sent), body(1, **sent))
    info = await _info(client)
    assert [key for key in info if key not in BASE_KEYS + NULL_KEYS] == [
        "enable_dsa_cache_layer_split",
        "decode_allocation_policy",
        "enable_kv_cache_sharding",
    ]


@pytest.mark.parametrize(
    ("first", "later", "sentence"),
    [
        ({"decode_allocation_policy": "prefill_complete"}, {"decode_allocation_policy": "early"}, "policies"),
        ({"decode_allocation_policy": "prefill_complete"}, {}, "policies"),  # not sent: SGLang's "early"
        ({}, {"decode_allocation_policy": "prefill_complete"}, "policies"),
        ({"dsv41_spec_layout": LAYOUT}, {"dsv41_spec_layout": {**LAYOUT, "num_draft_tokens": 8}}, "layout"),
        ({"dsv41_spec_layout": LAYOUT}, {"dsv41_spec_layout": None}, "layout"),
        ({}, {"dsv41_spec_layout": LAYOUT}, "layout"),
    ],
    ids=["policy", "policy not sent", "policy first not sent", "layout", "layout null", "layout first null"],
)
async def test_a_later_rank_with_another_value_is_refused(
    client: Any, first: dict[str, Any], later: dict[str, Any], sentence: str
) -> None:
    """A later rank whose decode_allocation_policy or dsv41_spec_layout differs (as SGLang compares them: a
    field not sent is its default) is the 409 carrying SGLang's sentence, and changes nothing."""
    await _register(client, body(0, **first))
    refused = await client.put("/route", json=body(1, **later))
    assert refused.status == 409
    detail = (await refused.json())["detail"]
    expected = {
        "policies": "Inconsistent prefill allocation policies: ",
        "layout": "DeepSeek-V4.1 DSpark PD layout differs across prefill ranks: ",
    }[sentence]
    assert detail.startswith(expected), detail
    assert detail.endswith(".")
    assert ". " not in detail  # one sentence
    listing = await (await client.get("/prefill")).json()
    assert (listing["registered"], listing["missing"]) == (1, ["dp0-cp0-tp1-pp0"])
    assert (await client.get(f"/route?{ALL}")).status == 503


async def test_the_same_value_again_and_a_default_sent_later_are_accepted(client: Any) -> None:
    """A rank sending the deployment's value is a 200; a first rank without the policy and a later one
    sending SGLang's default, "early", agree, and the field, sent now, comes back."""
    await _register(client, body(0), body(1, decode_allocation_policy="early"))
    assert (await _info(client))["decode_allocation_policy"] == "early"
    await _register(client, body(1, decode_allocation_policy="early"))


async def test_another_difference_keeps_the_first_value_with_a_warning(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """prefill_http_port, kv_layout and the rest keep the first rank's value; the later rank is a 200, and a
    WARNING names both values."""
    await _register(client, body(0, **RELEASE_FIELDS))
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        await _register(client, body(1, **{**RELEASE_FIELDS, "prefill_http_port": 30001, "kv_layout": "x"}))
    info = await _info(client)
    assert (info["prefill_http_port"], info["kv_layout"]) == (30000, "page_major")
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert warnings == [
        'prefill rank dp0-cp0-tp1-pp0 sent kv_layout "x" (the deployment keeps "page_major"); '
        "prefill_http_port 30001 (the deployment keeps 30000): the first value is kept"
    ]


@pytest.mark.parametrize(
    ("field", "value", "detail"),
    [
        ("dsv41_spec_layout", "layout", 'an object or null, not "layout"'),
        ("dsv41_spec_layout", [1, 2], "an object or null, not [1, 2]"),
        ("decode_allocation_policy", 3, "a non-empty string or null, not 3"),
        ("decode_allocation_policy", "", 'a non-empty string or null, not ""'),
        ("kv_layout", {"a": 1}, 'a string or null, not {"a": 1}'),
        ("enable_dsa_cache_layer_split", "yes", 'a boolean or null, not "yes"'),
        ("enable_kv_cache_sharding", 1, "a boolean or null, not 1"),
        ("prefill_http_port", "30000", 'a port, an integer from 1 to 65535 or null, not "30000"'),
        ("prefill_http_port", 70000, "a port, an integer from 1 to 65535 or null, not 70000"),
        ("prefill_http_port", True, "a port, an integer from 1 to 65535 or null, not true"),
    ],
)
async def test_a_malformed_release_field_is_a_400_and_nothing_is_stored(
    client: Any, field: str, value: Any, detail: str
) -> None:
    reply = await client.put("/route", json=body(0, **{field: value}))
    assert reply.status == 400
    assert (await reply.json())["detail"] == f"The field {field} must be {detail}."
    assert (await (await client.get("/prefill")).json())["topology"] is None


async def test_a_whole_float_port_is_kept_as_an_integer(client: Any) -> None:
    await _register(client, body(0, prefill_http_port=30000.0), body(1))
    assert json.dumps((await _info(client))["prefill_http_port"]) == "30000"


async def test_a_field_a_later_release_adds_passes_through(client: Any) -> None:
    """A field this server has never heard of comes back as sent, after the known ones; one a later rank is
    the first to send is added; the server's own keys and the lease are never replaced or passed."""
    future = {"enable_next_thing": True, "next_layout": {"blocks": [1, 2]}}
    lease = (await (await client.post("/leases", json={"ttl": 60})).json())["lease"]
    own = {"dp_size": 99, "follow_bootstrap_room": True, "target_tp_rank": 3, "lease": lease}
    await _register(client, {**body(0, **future, prefill_http_port=30000), **own})
    await _register(client, body(1, **future, next_count=7))
    info = await _info(client)
    assert list(info) == [*BASE_KEYS, "prefill_http_port", *future, "next_count", *NULL_KEYS]
    assert (info["next_layout"], info["next_count"]) == ({"blocks": [1, 2]}, 7)
    assert (info["dp_size"], info["follow_bootstrap_room"], info["target_tp_rank"]) == (1, False, None)


# -- two replicas of one registry, over Redis and over etcd -----------------


async def _replicas(aiohttp_client: Any, config: ServerConfig) -> tuple[Any, Any]:
    kwargs = {"server_kwargs": {"handler_cancellation": True}}
    return (
        await aiohttp_client(create_app(config), **kwargs),
        await aiohttp_client(create_app(config), **kwargs),
    )


@pytest.fixture(params=["redis", "etcd"])
async def replicas(aiohttp_client: Any, request: pytest.FixtureRequest) -> tuple[Any, Any]:
    """Two replicas of one registry, over Redis or over etcd (a prefix of the test's own)."""
    if request.param == "redis":
        redis = request.getfixturevalue("shared_redis")
        config = ServerConfig(store=redis.url, store_prefix=unique_prefix())
    else:
        cluster: Cluster = request.getfixturevalue("shared_etcd")
        config = ServerConfig(store=cluster.url(unique_prefix()))
    return await _replicas(aiohttp_client, config)


async def test_two_first_ranks_with_other_policies_through_two_replicas(replicas: tuple[Any, Any]) -> None:
    """Two first ranks at once, one through each replica, with other policies: one fixes the deployment,
    the other is the 409 with SGLang's sentence; both replicas answer the first's value."""
    a, b = replicas
    sent = await asyncio.gather(
        a.put("/route", json=body(0, decode_allocation_policy="prefill_complete")),
        b.put("/route", json=body(1, decode_allocation_policy="early")),
    )
    statuses = sorted(reply.status for reply in sent)
    assert statuses == [200, 409]
    refused = next(reply for reply in sent if reply.status == 409)
    assert (await refused.json())["detail"].startswith("Inconsistent prefill allocation policies: ")
    kept = "prefill_complete" if sent[0].status == 200 else "early"
    listing = await (await b.get("/prefill")).json()
    assert listing["registered"] == 1
    missing = body(1 if sent[0].status == 200 else 0, decode_allocation_policy=kept)
    await _register(a, missing)
    for replica in (a, b):
        assert (await _info(replica))["decode_allocation_policy"] == kept


async def test_fields_first_sent_through_two_replicas_at_once_are_both_kept(
    replicas: tuple[Any, Any],
) -> None:
    """Once the deployment is fixed, two ranks at once through two replicas, each the first to send a field:
    both fields are kept (each added in one step at the version read), and a third rank's other value of
    one keeps the first."""
    a, b = replicas
    await _register(a, rank_body(0, 0, tp_size=3, dp_size=1, **RELEASE_FIELDS))
    sent = await asyncio.gather(
        a.put("/route", json=rank_body(1, 0, tp_size=3, dp_size=1, **RELEASE_FIELDS, next_a=1)),
        b.put("/route", json=rank_body(2, 0, tp_size=3, dp_size=1, **RELEASE_FIELDS, next_b=2)),
    )
    assert [reply.status for reply in sent] == [200, 200]
    await _register(b, rank_body(2, 0, tp_size=3, dp_size=1, **RELEASE_FIELDS, next_a=5))
    for replica in (a, b):
        info = await _info(replica)
        assert {name: info[name] for name in RELEASE_FIELDS} == RELEASE_FIELDS
        assert (info["next_a"], info["next_b"]) == (1, 2)


async def test_a_deployment_redeployed_after_its_ranks_left_brings_its_own_fields(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranks on a lease leave with it, the topology record stays; the next deployment of the same sizes
    fixes its own fields (a new prefill_http_port), not the gone deployment's (once no rank of the old one
    came within LEFT_AFTER, shortened here)."""
    monkeypatch.setattr(deployment, "LEFT_AFTER", 0.05)
    lease = (await (await client.post("/leases", json={"ttl": 60})).json())["lease"]
    await _register(client, *(body(tp, **RELEASE_FIELDS, lease=lease) for tp in (0, 1)))
    assert (await client.delete(f"/leases/{lease}")).status == 200
    assert (await client.get(f"/route?{ALL}")).status == 503
    again = {**RELEASE_FIELDS, "prefill_http_port": 30001, "kv_layout": "token_major"}
    await _register(client, body(0, **again), body(1, **again))
    info = await _info(client)
    assert (info["prefill_http_port"], info["kv_layout"]) == (30001, "token_major")


async def test_first_ranks_at_once_each_the_first_to_send_a_field_keep_them_all(client: Any) -> None:
    """Three first ranks at once, each sending a field no other sends: the deployment keeps all three (one
    that finds the topology written but no rank yet waits for the first rank, not taking it for gone)."""
    bodies = [{**rank_body(tp, 0, tp_size=3, dp_size=1), f"next_{tp}": tp} for tp in range(3)]
    sent = await asyncio.gather(*(client.put("/route", json=body) for body in bodies))
    assert [reply.status for reply in sent] == [200, 200, 200]
    info = await _info(client)
    assert [info.get(f"next_{tp}") for tp in range(3)] == [0, 1, 2]


def test_the_warning_shows_a_clients_names_and_values_escaped_and_cut() -> None:
    """A field's name and values come from any client: the WARNING's words quote and escape them (no line
    of its own in the log) and cut a long one."""
    said = differing({"odd\nname": 1, "layout": "a" * 100}, [("odd\nname", 2), ("layout", "b" * 100)])
    assert said == [
        '"odd\\nname" 2 (the deployment keeps 1)',
        f'layout "{"b" * 63}...[102 chars] (the deployment keeps "{"a" * 63}...[102 chars])',
    ]
