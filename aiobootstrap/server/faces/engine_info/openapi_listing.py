"""The OpenAPI description of ``GET /ranks`` (``listing.py``) and its ``Listing``: the kinds it lists are
those of the kind table as it is when the document is made."""

from __future__ import annotations

from typing import Any

from ...._names import TRANSFER_ENGINE_INFO
from ....wire.routes import MISSING_LIST_MAX, RANKS_PATH
from ...openapi.paths import BAD_REQUEST, ROLE_QUERY, UNAVAILABLE, json_reply, query
from . import kinds as _kinds

__all__ = ["LISTING", "listing_paths"]

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
