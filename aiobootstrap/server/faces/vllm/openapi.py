"""The vLLM face's OpenAPI description: ``/register``, ``/query`` and ``/vllm``."""

from __future__ import annotations

from typing import Any

from ....wire.routes import JSON_TYPE
from ....wire.vllm import MAX_RANK, MAX_TEXT, QUERY_PATH, REGISTER_PATH, VLLM_LISTING_PATH
from ...openapi.leases import LEASE_REPLIES
from ...openapi.paths import BAD_REQUEST, BODY_ERRORS, BOOT, SECONDS, UNAVAILABLE, json_reply, query
from ...openapi.schemas import RANK, ref

__all__ = ["PATHS", "SCHEMAS"]

_JSON = JSON_TYPE
_SIZE = {"type": "string", "pattern": "^[1-9][0-9]{0,6}$"}
"""A size as the query carries it: 1 to 9,999,999."""
_TEXT = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}
_RANK = {"type": "integer", "minimum": 0, "maximum": MAX_RANK}
_COUNT = {"type": "integer", "minimum": 0}

PATHS: dict[str, dict[str, Any]] = {
    REGISTER_PATH: {
        "post": {
            "operationId": "registerVllmWorker",
            "summary": "A vLLM prefill worker's side channel (the Mooncake connector's registration): the same "
            "worker at a new address replaces the old; another engine takes a dp rank over only when none of "
            "its holder's workers answers a TCP connect.",
            "parameters": [
                {
                    "name": "X-Aiobootstrap-Lease",
                    "in": "header",
                    "required": False,
                    "description": "Put the worker on this lease (empty: on none).",
                    "schema": {"type": "string"},
                }
            ],
            "requestBody": {"required": True, "content": {_JSON: {"schema": ref("VllmWorker")}}},
            "responses": {
                "200": json_reply('Registered: {"status": "ok"}, as vLLM\'s server answers.', "VllmOk"),
                "400": json_reply(
                    "A malformed body (one sentence, where vLLM's server answers 422), or another live engine "
                    "holds the dp rank (vLLM's sentence: Engine ID mismatch for dp_rank=D: expected OLD, got NEW)."
                ),
                **BODY_ERRORS,
                "503": UNAVAILABLE,
                **LEASE_REPLIES,
            },
        }
    },
    QUERY_PATH: {
        "get": {
            "operationId": "queryVllmWorkers",
            "summary": "Every dp rank's engine and its workers' addresses, as vLLM's server answers ({} before "
            "any); with wait and tp_size, once every registered dp rank has all its workers.",
            "parameters": [
                query(
                    "wait",
                    "Seconds to hold the request until the deployment is whole (with tp_size, pp_size or dp_size) "
                    "or a worker changed after `after`; clamped to --max-wait. Without either, ignored.",
                    SECONDS,
                ),
                query("tp_size", "The tp ranks each dp rank must have.", _SIZE),
                query(
                    "pp_size", "The pp ranks each tp rank must have (default 1; counted with tp_size).", _SIZE
                ),
                query("dp_size", "The dp ranks there must be (default 1).", _SIZE),
                query(
                    "after",
                    "A version (from X-Aiobootstrap-Version): with wait, hold until a worker changes after it.",
                    {**RANK, "default": 0},
                ),
                BOOT,
            ],
            "responses": {
                "200": json_reply("The workers by dp rank, tp rank and pp rank (string keys).", "VllmQuery"),
                "400": BAD_REQUEST,
                "503": json_reply(
                    "Not whole at the deadline (the detail names what is missing, `registered` the workers), "
                    "or the server is unavailable."
                ),
            },
        }
    },
    VLLM_LISTING_PATH: {
        "get": {
            "operationId": "listVllm",
            "summary": "The namespace's vLLM workers: each one's engine, ranks, address, version, age and (with "
            "probing on) its failed connects in a row (the page and status read it).",
            "responses": {
                "200": json_reply("The workers.", "VllmListing"),
                "400": BAD_REQUEST,
                "503": UNAVAILABLE,
            },
        }
    },
}

SCHEMAS: dict[str, Any] = {
    "VllmWorker": {
        "type": "object",
        "required": ["engine_id", "dp_rank", "tp_rank", "pp_rank", "addr"],
        "properties": {
            "engine_id": _TEXT,
            "dp_rank": _RANK,
            "tp_rank": _RANK,
            "pp_rank": _RANK,
            "addr": {**_TEXT, "description": "The worker's ZMQ side channel: tcp://host:port."},
        },
        "description": "vLLM's RegisterWorkerPayload; other fields are accepted and ignored.",
    },
    "VllmOk": {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"const": "ok"}},
    },
    "VllmQuery": {
        "type": "object",
        "description": "By dp rank (a string key): the engine holding it and its workers' addresses.",
        "additionalProperties": {
            "type": "object",
            "required": ["engine_id", "worker_addr"],
            "properties": {
                "engine_id": {"type": "string"},
                "worker_addr": {
                    "type": "object",
                    "description": "By tp rank, then pp rank (string keys): the worker's address.",
                    "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
        },
    },
    "VllmListing": {
        "type": "object",
        "required": ["probing", "worker_count", "dp_ranks", "workers"],
        "properties": {
            "probing": {"type": "boolean"},
            "worker_count": _COUNT,
            "dp_ranks": _COUNT,
            "workers": {"type": "array", "items": {"type": "object"}, "description": "At most 4,096."},
        },
    },
}
