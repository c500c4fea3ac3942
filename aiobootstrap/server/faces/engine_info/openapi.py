"""The engine-info face's OpenAPI description: each record kind's four routes and three schemas,
from its entry in the kind table (``kinds.py``) as the table is when the document is made, and the
listing of a kind (``/ranks``, its ``Listing``)."""

from __future__ import annotations

from typing import Any

from ...._names import TRANSFER_ENGINE_INFO
from ....wire.params import FORMS
from ....wire.routes import JSON_TYPE, MISSING_LIST_MAX, RANKS_PATH
from ...openapi.leases import LEASE_REPLIES, with_lease
from ...openapi.paths import (
    BAD_REQUEST,
    BODY_ERRORS,
    BOOT,
    RANKS,
    ROLE_QUERY,
    SECONDS,
    UNAVAILABLE,
    json_reply,
    query,
    text_reply,
)
from ...openapi.schemas import RANK, ROLE, ref
from . import kinds as _kinds
from .kinds import RecordKind

__all__ = ["kind_paths", "kind_schemas", "paths", "schemas"]

_JSON = JSON_TYPE

_WAIT = query(
    "wait",
    "Seconds to hold the request until the rank(s) register; 0 (the default) answers at once. "
    "Clamped to the server's --max-wait.",
    SECONDS,
)
_AFTER = query(
    "after",
    "Only a registration with a greater version counts (to wait for a restarted rank's new info).",
    {**RANK, "default": 0},
)

_FORM = query(
    "form",
    "object: serve each registration whole, as the object it was; list (the default): the kind's "
    "usual shape (for classic transfer-engine info, [session_id, weights_info_dict]).",
    {"type": "string", "enum": list(FORMS), "default": "list"},
)
_RANK = query("rank", "The rank.", RANK, required=True)


def kind_paths(kind: RecordKind) -> dict[str, dict[str, Any]]:
    """The four operations of a per-rank record kind, from its table entry."""
    title, noun = kind.title, kind.noun
    absent = f"`{kind.absent(0).replace(' 0', ' N')}`"
    return {
        kind.register_path: {
            "put": {
                "operationId": f"register{title}",
                "summary": f"Publish a rank's {noun}, replacing any earlier one of its role, and wake its waiters.",
                "requestBody": {
                    "required": True,
                    "content": {_JSON: {"schema": ref(f"{title}Registration")}},
                },
                "responses": {
                    "200": text_reply("Registered."),
                    "400": BAD_REQUEST,
                    **BODY_ERRORS,
                    "409": json_reply(
                        "A new rank past the server's --max-ranks (no world size set), or a new role past --max-roles."
                    ),
                    "503": UNAVAILABLE,
                    **LEASE_REPLIES,
                },
            },
            "delete": {
                "operationId": f"unregister{title}",
                "summary": f"Remove a rank's {noun}; its waiters go on waiting for a new registration.",
                "parameters": [_RANK, ROLE_QUERY],
                "responses": {
                    "200": text_reply("Removed."),
                    "400": BAD_REQUEST,
                    "404": json_reply(f"The rank was not registered: {absent}, `missing: [N]`.", "Missing"),
                    "503": UNAVAILABLE,
                },
            },
        },
        kind.get_path: {
            "get": {
                "operationId": f"get{title}",
                "summary": f"A rank's {noun}, optionally waiting for it to register. The "
                "X-Aiobootstrap-Version header carries the record's version.",
                "parameters": [_RANK, ROLE_QUERY, _WAIT, _AFTER, BOOT, _FORM],
                "responses": {
                    "200": json_reply(f"The rank's {noun}.", title),
                    "400": BAD_REQUEST,
                    "404": json_reply(
                        f"Not registered (when the wait ran out): {absent}, `missing: [N]`.", "Missing"
                    ),
                    "503": UNAVAILABLE,
                },
            }
        },
        kind.batch_path: {
            "get": {
                "operationId": f"get{title}Batch",
                "summary": f"Several ranks' {noun} in one request, waiting until all of them have registered.",
                "parameters": [
                    RANKS,
                    ROLE_QUERY,
                    _WAIT,
                    _AFTER,
                    BOOT,
                    _FORM,
                ],
                "responses": {
                    "200": json_reply(f"Every asked rank's {noun}.", f"{title}Batch"),
                    "400": BAD_REQUEST,
                    "404": json_reply(
                        "Some ranks are not registered (when the wait ran out); listed in missing.", "Missing"
                    ),
                    "503": UNAVAILABLE,
                },
            }
        },
    }


def kind_schemas(kind: RecordKind) -> dict[str, Any]:
    """A kind's register body, get reply and batch reply, from its table entry."""
    item = ref(kind.title) if kind.item_schema is None else dict(kind.item_schema)
    registration = {
        "type": "object",
        "required": [kind.field],
        "description": "Give rank (or, from older clients, tp_rank). When rank is present it wins and "
        "tp_rank is not read at all.",
        "properties": {
            "rank": RANK,
            "tp_rank": {"description": "Read only when rank is absent; then it must be a rank."},
            "role": ROLE,
            kind.field: dict(kind.value_schema),
        },
        "anyOf": [
            {"required": ["rank"]},
            {"required": ["tp_rank"], "properties": {"tp_rank": RANK}},
        ],
    }
    return {
        f"{kind.title}Registration": with_lease(registration),
        kind.title: dict(kind.reply_schema),
        f"{kind.title}Batch": {
            "type": "object",
            "required": [kind.batch_field, "version"],
            "properties": {
                kind.batch_field: {"type": "array", "items": item},
                "version": {"type": "integer", "description": "The namespace's latest version."},
            },
        },
    }


def paths() -> dict[str, dict[str, Any]]:
    """Every record kind's routes, and the listing."""
    every = {path: item for kind in _kinds.KINDS for path, item in kind_paths(kind).items()}
    return {**every, **listing_paths()}


def schemas() -> dict[str, Any]:
    """Every record kind's register body (with its lease), reply and batch reply, and the listing's reply."""
    every = {name: schema for kind in _kinds.KINDS for name, schema in kind_schemas(kind).items()}
    return {**every, "Listing": LISTING}


LISTING = {
    "type": "object",
    "required": ["version", "kind", "role", "world_size", "count", "ranks", "missing", "missing_ranks"],
    "properties": {
        "version": {"type": "integer"},
        "kind": {"type": "string", "description": "The record kind listed."},
        "role": {"type": "string", "description": "The role listed."},
        "world_size": {"type": ["integer", "null"]},
        "count": {"type": "integer"},
        "ranks": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "rank": {"type": "integer"},
                    "session_id": {"type": "string", "description": "Transfer-engine info only."},
                    "backend": {"type": "string", "description": "Tagged transfer-engine info only."},
                    "version": {"type": "integer"},
                    "registered_at": {"type": "number", "description": "Unix time of the registration."},
                    "age": {"type": "number", "description": "Seconds since the registration."},
                    "lease": {
                        "type": "string",
                        "description": "The lease the record is on (only when on one).",
                    },
                    "lease_remaining": {
                        "type": "number",
                        "description": "Seconds until that lease expires unless kept alive.",
                    },
                    "lease_ttl": {
                        "type": "number",
                        "description": "That lease's TTL: each keepalive sets its remaining time back to it.",
                    },
                },
            },
        },
        "missing": {
            "type": ["array", "null"],
            "items": {"type": "integer"},
            "description": (
                f"The ranks of [0, world_size) not registered, in order: all of them, or the first "
                f"{MISSING_LIST_MAX} when missing_truncated is true; null without a world size."
            ),
        },
        "missing_ranks": {
            "type": ["string", "null"],
            "description": (
                "Every rank of [0, world_size) not registered, as a rank set such as 0-3,8 "
                "(empty when none is missing); null without a world size."
            ),
        },
        "waiters_by_rank": {
            "type": "object",
            "additionalProperties": {"type": "integer", "minimum": 1},
            "description": (
                "The waits parked on ranks of this kind and role: each key a rank set such as 0-3,8, "
                "its value the waits parked on each of its ranks; only ranks with waits."
            ),
        },
        "missing_truncated": {
            "type": "boolean",
            "description": f"True when more than {MISSING_LIST_MAX} ranks are missing.",
        },
    },
}
"""``GET /ranks``' reply."""


def listing_paths() -> dict[str, dict[str, Any]]:
    """``GET /ranks``, its ``kind`` one of the table's."""
    kinds = [kind.name for kind in _kinds.KINDS]
    return {
        RANKS_PATH: {
            "get": {
                "operationId": "listRanks",
                "summary": "One kind and role's registered ranks (without their values) and, with a world "
                "size, the missing ones.",
                "parameters": [
                    query(
                        "kind",
                        "The record kind listed.",
                        {"type": "string", "default": TRANSFER_ENGINE_INFO, "enum": kinds},
                    ),
                    ROLE_QUERY,
                ],
                "responses": {
                    "200": json_reply("The listing.", "Listing"),
                    "400": BAD_REQUEST,
                    "503": UNAVAILABLE,
                },
            }
        },
    }
