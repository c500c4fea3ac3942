"""The engine-info face's OpenAPI description: each record kind's four routes and three schemas,
from its entry in the kind table (``kinds.py``) as the table is when the document is made, and the
listing of a kind (``/ranks``, ``openapi_listing.py``)."""

from __future__ import annotations

from typing import Any

from ....wire.params import FORMS
from ....wire.routes import JSON_TYPE
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
from .openapi_listing import LISTING, listing_paths

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
