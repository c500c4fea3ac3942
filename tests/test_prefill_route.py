"""The prefill face's ``/route`` (SGLang's PD bootstrap server), over the memory store and Redis: the
engines' replies byte for byte where their code reads them, readiness by distinct ranks, and a clear
``4xx`` with nothing stored where their server answered a ``500``."""

from __future__ import annotations

from typing import Any

import pytest

from .helpers.prefill import ALL, rank_body, route

PARALLEL_INFO = (
    b'{"attn_tp_size": 2, "attn_cp_size": 1, "dp_size": 2, "pp_size": 1, "page_size": 1, '
    b'"kv_cache_dtype": "auto", "follow_bootstrap_room": false, "target_tp_rank": null, '
    b'"target_tp_ranks": null, "target_cp_ranks": null, "target_pp_ranks": null, '
    b'"required_dst_info_num": null, "required_prefill_response_num": null}'
)
"""SGLang's parallel info for 2 dp x 2 tp ranks, as its server writes it (``json.dumps`` of its dataclass)."""


async def _put(client: Any, body: Any) -> tuple[int, str]:
    reply = await client.put("/route", json=body)
    return reply.status, await reply.text()


async def _get(client: Any, query: str) -> tuple[int, str, str]:
    reply = await client.get(f"/route?{query}")
    return reply.status, reply.content_type, await reply.text()


async def test_the_engines_replies_byte_for_byte(client: Any) -> None:
    """The table of issue 28: 503 text until complete, OK text, the parallel info, a rank's address, the 404
    and the 400 texts."""
    assert await _get(client, ALL) == (
        503,
        "text/plain",
        "Prefill server not fully registered yet (0 workers registered).",
    )
    for tp, dp in ((0, 0), (1, 0), (0, 1)):
        assert await _put(client, rank_body(tp, dp)) == (200, "OK")
    assert (await _get(client, route(1, 0, 1, 0)))[:2] == (503, "text/plain")
    assert await _put(client, rank_body(1, 1)) == (200, "OK")
    reply = await client.get(f"/route?{ALL}")
    assert (reply.status, reply.content_type, await reply.read()) == (200, "application/json", PARALLEL_INFO)
    reply = await client.get(f"/route?{route(1, 0, 1, 0)}")
    assert await reply.read() == b'{"rank_ip": "10.0.0.11", "rank_port": 17011}'
    assert await _get(client, route(2, 0, 0, 0)) == (
        404,
        "text/plain",
        "Bootstrap info not found for dp_rank=2 cp_rank=0 tp_rank=0 pp_rank=0",
    )
    for partial in ("prefill_dp_rank=0", route(0, 0, 0, 0).replace("target_pp_rank=0", "target_pp_rank=")):
        assert await _get(client, partial) == (400, "text/plain", "Missing inputs for bootstrap server.")


async def test_readiness_counts_distinct_ranks(client: Any) -> None:
    """One rank registering four times is one rank: the topology of four is not complete, and the 503 says 1
    (the engines' server counted four PUTs and answered rank 1 with a 404)."""
    for _ in range(4):
        assert (await _put(client, rank_body(0, 0)))[0] == 200
    assert await _get(client, ALL) == (
        503,
        "text/plain",
        "Prefill server not fully registered yet (1 workers registered).",
    )


@pytest.mark.parametrize(
    ("body", "dp"),
    [
        (rank_body(0, 1, tp_size=1), 1),  # DP attention: system_dp_size 1, the rank in attn_dp_rank
        (rank_body(0, 0, tp_size=1, dp_size=1, system_dp=(1, 2)), 1),  # plain DP: system_dp_rank of 2
    ],
    ids=["attn dp", "system dp"],
)
async def test_both_dp_forms(client: Any, body: dict[str, Any], dp: int) -> None:
    """The dp rank and size are attn_dp_* when system_dp_size is 1, else system_dp_*, as the engines read them."""
    assert (await _put(client, body))[0] == 200
    other = {**body, "attn_dp_rank": 0} if body["system_dp_size"] == 1 else {**body, "system_dp_rank": 0}
    assert (await _put(client, other))[0] == 200
    reply = await client.get(f"/route?{ALL}")
    assert (await reply.json())["dp_size"] == 2
    assert (await client.get(f"/route?{route(dp, 0, 0, 0)}")).status == 200


BAD_BODIES = [
    ({**rank_body(), "attn_tp_rank": "0"}, "attn_tp_rank must be an integer"),
    ({**rank_body(), "attn_tp_rank": -1}, "attn_tp_rank must be at least 0"),
    ({**rank_body(), "attn_tp_rank": 2}, "attn_tp_rank is 2, outside attn_tp_size 2"),
    ({**rank_body(), "page_size": None}, "page_size must be an integer"),
    ({key: value for key, value in rank_body().items() if key != "rank_port"}, "rank_port is missing"),
    ({**rank_body(), "rank_port": 70000}, "rank_port must be a port"),
    ({**rank_body(), "rank_ip": ""}, "rank_ip must be a non-empty string"),
    ({**rank_body(), "kv_cache_dtype": 3}, "kv_cache_dtype must be a non-empty string"),
    ({**rank_body(), "pp_size": 0}, "pp_size must be at least 1"),
    ({**rank_body(), "system_dp_size": True}, "system_dp_size must be an integer"),
    ({**rank_body(), "lease": 7}, "lease"),
    ([], "must be a JSON object"),
]


@pytest.mark.parametrize(("body", "detail"), BAD_BODIES, ids=[detail for _, detail in BAD_BODIES])
async def test_a_malformed_registration_is_a_400_naming_it_and_stores_nothing(
    client: Any, body: Any, detail: str
) -> None:
    """Each was a 500 "Server got itself in trouble" on the engines' server."""
    reply = await client.put("/route", json=body)
    assert reply.status == 400
    assert detail in (await reply.json())["detail"]
    assert await _get(client, ALL) == (
        503,
        "text/plain",
        "Prefill server not fully registered yet (0 workers registered).",
    )
    assert (await (await client.get("/watch?after=0")).json())["changes"] == []


@pytest.mark.parametrize("raw", [b"", b"{", b"null"], ids=["empty", "broken", "null"])
async def test_an_empty_or_broken_body_is_a_400(client: Any, raw: bytes) -> None:
    reply = await client.put("/route", data=raw)
    assert reply.status == 400
    assert (await reply.json())["detail"]


@pytest.mark.parametrize(
    "query",
    [
        route(0, 0, 0, 0).replace("=0&prefill_cp", "=x&prefill_cp"),
        route(0, 0, 0, 0).replace("target_tp_rank=0", "target_tp_rank=-2"),
        route(-1, 0, 0, 0),
    ],
    ids=["not a number", "negative", "one -1"],
)
async def test_a_bad_rank_in_the_query_is_a_400(client: Any, query: str) -> None:
    reply = await client.get(f"/route?{query}")
    assert reply.status == 400
    assert "must be a non-negative integer" in (await reply.json())["detail"]


async def test_a_contradicting_topology_is_a_409_naming_both_and_changes_nothing(client: Any) -> None:
    """A rank whose sizes, page size or KV dtype differ from the first's: 409, with both values; the engines'
    server mixed it in silently."""
    assert (await _put(client, rank_body(0, 0)))[0] == 200
    for changed, said in (
        ({"attn_tp_size": 4}, "attn_tp_size 2"),
        ({"page_size": 16}, "page_size 1"),
        ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype 'auto'"),
    ):
        reply = await client.put("/route", json={**rank_body(1, 0), **changed})
        assert reply.status == 409
        detail = (await reply.json())["detail"]
        assert said in detail
        assert repr(next(iter(changed.values()))) in detail
    assert (await client.get(f"/route?{route(0, 0, 1, 0)}")).status == 503
    assert await _get(client, ALL) == (
        503,
        "text/plain",
        "Prefill server not fully registered yet (1 workers registered).",
    )


async def test_delete_a_rank_then_the_deployment(client: Any) -> None:
    """DELETE /route removes one rank (404 text when absent); all four -1 remove the topology too, so the
    next registration may bring another."""
    for tp, dp in ((0, 0), (1, 0), (0, 1), (1, 1)):
        await _put(client, rank_body(tp, dp))
    assert (await client.delete(f"/route?{route(1, 0, 1, 0)}")).status == 200
    reply = await client.delete(f"/route?{route(1, 0, 1, 0)}")
    assert (reply.status, await reply.text()) == (
        404,
        "Bootstrap info not found for dp_rank=1 cp_rank=0 tp_rank=1 pp_rank=0",
    )
    assert (await _get(client, ALL))[2] == "Prefill server not fully registered yet (3 workers registered)."
    assert (await client.delete(f"/route?{ALL}")).status == 200
    assert (await _put(client, rank_body(0, 0, tp_size=1, dp_size=1)))[0] == 200
    assert (await (await client.get(f"/route?{ALL}")).json())["attn_tp_size"] == 1


async def test_newer_engines_keys_are_sent_only_when_registered(client: Any) -> None:
    """prefill_http_port and enable_dsa_cache_layer_split, which newer engines send, come back in the parallel
    info; without them, not (an older decode builds its dataclass from every key)."""
    await _put(
        client,
        rank_body(0, 0, tp_size=1, dp_size=1, prefill_http_port=30000, enable_dsa_cache_layer_split=False),
    )
    info = await (await client.get(f"/route?{ALL}")).json()
    assert (info["prefill_http_port"], info["enable_dsa_cache_layer_split"]) == (30000, False)
    assert list(info)[:7] == [
        "attn_tp_size",
        "attn_cp_size",
        "dp_size",
        "pp_size",
        "page_size",
        "kv_cache_dtype",
        "follow_bootstrap_room",
    ]


async def test_the_listing_names_the_ranks_registered_and_missing(client: Any) -> None:
    """GET /prefill: the topology, each rank with its address, and the missing ones by name."""
    empty = await (await client.get("/prefill")).json()
    assert (empty["topology"], empty["registered"], empty["missing"]) == (None, 0, [])
    for tp, dp in ((0, 0), (1, 0), (0, 1)):
        await _put(client, rank_body(tp, dp))
    listing = await (await client.get("/prefill")).json()
    assert listing["topology"]["dp_size"] == 2
    assert (listing["expected"], listing["registered"], listing["complete"]) == (4, 3, False)
    assert listing["missing"] == ["dp1-cp0-tp1-pp0"]
    first = next(rank for rank in listing["ranks"] if (rank["dp"], rank["tp"]) == (1, 0))
    assert (first["cp"], first["pp"], first["rank_ip"], first["rank_port"]) == (0, 0, "10.0.0.10", 17010)
