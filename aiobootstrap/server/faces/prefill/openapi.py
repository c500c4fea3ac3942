"""The prefill face's OpenAPI description: ``/route``, ``/register_dp_rank``, ``/query_dp_ranks``."""

from __future__ import annotations

from typing import Any

from ....wire.prefill import MAX_RANKS
from ....wire.prefill_fields import REQUIRED_FIELDS
from ....wire.prefill_rooms import MAX_ROOM, MAX_ROOMS_ASKED
from ....wire.routes import (
    JSON_TYPE,
    PREFILL_LISTING_PATH,
    PREFILL_QUERY_ROOMS_PATH,
    PREFILL_REGISTER_ROOM_PATH,
    PREFILL_ROUTE_PATH,
)
from ...openapi.leases import LEASE_REPLIES, with_lease
from ...openapi.paths import BAD_REQUEST, BODY_ERRORS, SECONDS, UNAVAILABLE, json_reply, query, text_reply
from ...openapi.schemas import ref

__all__ = ["PATHS", "SCHEMAS"]

_JSON = JSON_TYPE
_RANK = {"type": "string", "pattern": "^(-1|[0-9]{1,18})$"}
"""A rank as the query carries it: a non-negative integer, or -1 (all four -1: the whole topology)."""
_ROUTE_QUERY = [
    query(name, f"The {what} rank; -1 on all four for the whole topology.", _RANK, required=True)
    for name, what in (
        ("prefill_dp_rank", "prefill data-parallel"),
        ("prefill_cp_rank", "prefill context-parallel"),
        ("target_tp_rank", "tensor-parallel"),
        ("target_pp_rank", "pipeline-parallel"),
    )
]
_WAIT = query(
    "wait",
    "Seconds to hold the request until its reply would be a 200; clamped to --max-wait.",
    SECONDS,
)


def _text_or_json(description: str, example: str) -> dict[str, Any]:
    """A reply in the engines' plain text, or the server's JSON error."""
    reply = text_reply(description, example)
    reply["content"][_JSON] = {"schema": ref("Error")}
    return reply


_MISSING = _text_or_json(
    "A parameter missing or empty (the engines' text), or a malformed one (JSON).",
    "Missing inputs for bootstrap server.",
)
_NOT_READY = _text_or_json(
    "Not every rank of the topology has registered yet (the engines' text, with the count of distinct ranks), "
    "or the server is unavailable (JSON).",
    "Prefill server not fully registered yet (3 workers registered).",
)
_INTEGER = {"type": "integer", "minimum": 0}
_ROOM = {"type": "integer", "minimum": 0, "maximum": MAX_ROOM}

PATHS: dict[str, dict[str, Any]] = {
    PREFILL_ROUTE_PATH: {
        "put": {
            "operationId": "registerPrefillRank",
            "summary": "A prefill rank's address and parallel layout (SGLang's register_to_bootstrap); the first "
            "fixes the topology.",
            "requestBody": {"required": True, "content": {_JSON: {"schema": ref("PrefillRank")}}},
            "responses": {
                "200": text_reply("Registered."),
                "400": BAD_REQUEST,
                **BODY_ERRORS,
                "409": json_reply(
                    "Its sizes, page size or KV dtype contradict the registered topology, or its "
                    "decode_allocation_policy or dsv41_spec_layout differs from the deployment's (the detail "
                    "carries SGLang's sentence)."
                ),
                "503": UNAVAILABLE,
                **LEASE_REPLIES,
            },
        },
        "get": {
            "operationId": "getPrefillRoute",
            "summary": "The deployment's parallel info (all four -1), or one rank's address, once every rank of "
            "the topology has registered.",
            "parameters": [*_ROUTE_QUERY, _WAIT],
            "responses": {
                "200": json_reply("The parallel info, or {rank_ip, rank_port}.", "PrefillRoute"),
                "400": _MISSING,
                "404": text_reply(
                    "No such rank (the topology is complete).", "Bootstrap info not found for ..."
                ),
                "503": _NOT_READY,
            },
        },
        "delete": {
            "operationId": "unregisterPrefillRank",
            "summary": "Unregister one rank, or the whole deployment (all four -1); the topology goes with the "
            "last rank.",
            "parameters": _ROUTE_QUERY,
            "responses": {
                "200": text_reply("Unregistered."),
                "400": _MISSING,
                "404": text_reply("No such rank.", "Bootstrap info not found for ..."),
                "503": UNAVAILABLE,
            },
        },
    },
    PREFILL_REGISTER_ROOM_PATH: {
        "post": {
            "operationId": "registerDpRank",
            "summary": "The prefill dp rank a bootstrap room went to; kept --dp-room-ttl to twice that.",
            "requestBody": {"required": True, "content": {_JSON: {"schema": ref("PrefillRoom")}}},
            "responses": {
                "200": text_reply("Registered."),
                "400": BAD_REQUEST,
                **BODY_ERRORS,
                "409": json_reply("The namespace holds as many rooms as it keeps."),
                "503": UNAVAILABLE,
            },
        }
    },
    PREFILL_QUERY_ROOMS_PATH: {
        "post": {
            "operationId": "queryDpRanks",
            "summary": "The dp rank of each room known; with wait, once every room asked is known.",
            "parameters": [_WAIT],
            "requestBody": {"required": True, "content": {_JSON: {"schema": ref("PrefillRooms")}}},
            "responses": {
                "200": json_reply("The known rooms' dp ranks, by room.", "PrefillDpRanks"),
                "400": BAD_REQUEST,
                **BODY_ERRORS,
                "503": UNAVAILABLE,
            },
        }
    },
}

PATHS[PREFILL_LISTING_PATH] = {
    "get": {
        "operationId": "listPrefill",
        "summary": "The prefill deployment: its topology (null before the first rank), each rank registered, "
        "and the ranks still missing (the page and status read it).",
        "responses": {
            "200": json_reply("The topology, the ranks and the missing ones.", "PrefillListing"),
            "400": BAD_REQUEST,
            "503": UNAVAILABLE,
        },
    }
}

SCHEMAS: dict[str, Any] = {
    "PrefillListing": {
        "type": "object",
        "required": ["topology", "expected", "registered", "complete", "ranks", "missing", "missing_count"],
        "properties": {
            "topology": {
                "type": ["object", "null"],
                "description": "dp_size, cp_size, tp_size, pp_size, page_size, kv_cache_dtype, "
                "follow_bootstrap_room, and fields: those passed through to decode in the parallel info.",
            },
            "expected": {"type": ["integer", "null"]},
            "registered": _INTEGER,
            "complete": {"type": "boolean"},
            "ranks": {"type": "array", "items": {"type": "object"}},
            "missing": {"type": "array", "items": {"type": "string"}, "description": "At most 1,024 names."},
            "missing_count": _INTEGER,
        },
    },
    "PrefillRank": with_lease(
        {
            "type": "object",
            "required": list(REQUIRED_FIELDS),
            "properties": {
                **{
                    name: {"type": "integer", "minimum": 1}
                    for name in (
                        "attn_tp_size",
                        "attn_cp_size",
                        "attn_dp_size",
                        "pp_size",
                        "system_dp_size",
                        "page_size",
                    )
                },
                **{
                    name: _INTEGER
                    for name in ("attn_tp_rank", "attn_cp_rank", "attn_dp_rank", "pp_rank", "system_dp_rank")
                },
                "rank_ip": {"type": "string", "minLength": 1},
                "rank_port": {"type": "integer", "minimum": 1, "maximum": 65535},
                "kv_cache_dtype": {"type": "string", "minLength": 1},
                "load_balance_method": {"type": "string"},
                "kv_layout": {"type": ["string", "null"]},
                "dsv41_spec_layout": {"type": ["object", "null"]},
                "decode_allocation_policy": {"type": ["string", "null"], "minLength": 1},
                "enable_dsa_cache_layer_split": {"type": ["boolean", "null"]},
                "enable_kv_cache_sharding": {"type": ["boolean", "null"]},
                "prefill_http_port": {"type": ["integer", "null"], "minimum": 1, "maximum": 65535},
            },
            "description": "A rank must be below its size; a deployment has at most "
            f"{MAX_RANKS} ranks (the product of its sizes). Every other field sent is kept, and every field "
            "beyond those the server reads (not null) is carried back in the parallel info, fixed by the first "
            "rank that sends it (the six above are SGLang 0.5.23's).",
        }
    ),
    "PrefillRoute": {
        "type": "object",
        "description": "The parallel info (attn_tp_size, attn_cp_size, dp_size, pp_size, page_size, "
        "kv_cache_dtype, follow_bootstrap_room, every other field the prefill ranks sent (SGLang 0.5.23's "
        "kv_layout, dsv41_spec_layout, decode_allocation_policy, enable_dsa_cache_layer_split, "
        "enable_kv_cache_sharding, prefill_http_port, and any a later release adds) and the keys decode "
        "fills, null), or a rank's rank_ip and rank_port.",
    },
    "PrefillRoom": {
        "type": "object",
        "required": ["bootstrap_room", "dp_rank"],
        "properties": {"bootstrap_room": _ROOM, "dp_rank": _ROOM},
    },
    "PrefillRooms": {
        "type": "object",
        "required": ["bootstrap_rooms"],
        "properties": {"bootstrap_rooms": {"type": "array", "items": _ROOM, "maxItems": MAX_ROOMS_ASKED}},
    },
    "PrefillDpRanks": {"type": "object", "additionalProperties": _ROOM},
}
