"""The OpenAPI document's component schemas: the bodies and replies the paths refer to.

A record kind's register body, reply and batch reply are described from its
entry in the kind table (:func:`kind_schemas`); the rest are written here.
"""

from __future__ import annotations

from typing import Any

from ... import wire
from ..._names import DEFAULT_ROLE, MAX_ROLE_LENGTH
from ..._ranks import MAX_RANK
from ..faces.kinds import RecordKind

__all__ = ["RANK", "ROLE", "SCHEMAS", "kind_schemas", "ref"]


def ref(name: str) -> dict[str, str]:
    """A reference to the component schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


RANK = {"type": "integer", "minimum": 0, "maximum": MAX_RANK}
"""A rank, in a query or a body; in a query, any integer (a version too): plain digits, at most as many as ``MAX_RANK`` has."""
ROLE = {"type": "string", "minLength": 1, "maxLength": MAX_ROLE_LENGTH, "default": DEFAULT_ROLE}
"""A role, in a query or a body."""


def kind_schemas(kind: RecordKind) -> dict[str, Any]:
    """A kind's register body, get reply and batch reply, from its table entry."""
    item = ref(kind.title) if kind.item_schema is None else dict(kind.item_schema)
    return {
        f"{kind.title}Registration": {
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
        },
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


SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["detail"],
        "properties": {
            "detail": {"type": "string", "description": "One sentence saying what went wrong."},
            "error": {
                "type": "string",
                "description": "Only for a missing or empty encoder url: the engines' own error text.",
            },
        },
    },
    "Missing": {
        "type": "object",
        "required": ["detail", "missing"],
        "properties": {
            "detail": {"type": "string"},
            "missing": {
                "type": "array",
                "items": {"type": "integer"},
                "description": (
                    f"The ranks still missing, in order: all of them, or the first {wire.MISSING_LIST_MAX} "
                    "when missing_truncated is true."
                ),
            },
            "missing_ranks": {
                "type": "string",
                "description": "A batch's every missing rank as a rank set such as 0-3,8 (a batch 404 only).",
            },
            "missing_truncated": {
                "type": "boolean",
                "description": f"True when more than {wire.MISSING_LIST_MAX} ranks are missing.",
            },
        },
    },
    "EncoderUrl": {
        "type": "object",
        "required": ["url"],
        "properties": {
            "url": {
                "type": "string",
                "minLength": 1,
                "example": "http://10.0.0.9:8000",
                "description": "Kept as sent, less any trailing /. Missing or empty: 400 with the engines' "
                "words, detail and error (Missing or empty 'url' field).",
            }
        },
    },
    "EncoderUrls": {
        "type": "object",
        "required": ["encoder_urls", "version"],
        "properties": {
            "encoder_urls": {
                "type": "array",
                "items": {"type": "string"},
                "description": "In order of first registration.",
            },
            "version": {
                "type": "integer",
                "description": "The list's version: pass it as after= to wait for a change.",
            },
        },
    },
    "EncoderUrlHealth": {
        "type": "object",
        "required": ["version", "probing", "interval", "failures_to_evict", "encoder_urls"],
        "properties": {
            "version": {"type": "integer", "minimum": 0, "description": "The list's version."},
            "probing": {"type": "boolean", "description": "False with --encoder-health-interval 0."},
            "interval": {"type": "number", "description": "Seconds between rounds of probes."},
            "failures_to_evict": {"type": "integer", "description": "Consecutive failures that evict."},
            "findings": {
                "type": "integer",
                "description": "Probe rounds on this replica that changed a finding: a watch's `findings` follows the next.",
            },
            "encoder_urls": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["url", "state"],
                    "properties": {
                        "url": {"type": "string"},
                        "state": {"enum": ["healthy", "failing", "evicted", "listed"]},
                        "failures": {"type": "integer", "minimum": 0},
                        "evicted_for": {
                            "type": ["number", "null"],
                            "description": "Seconds since this replica evicted it (null: not seen yet).",
                        },
                    },
                },
                "description": "The listed URLs in order of first registration, then the evicted ones.",
            },
        },
    },
    "Namespaces": {
        "type": "object",
        "required": ["namespaces"],
        "properties": {
            "waits": {
                "type": "integer",
                "minimum": 0,
                "description": "Moves of parked waits so far (parked or gone), for `?waits=` to follow them.",
            },
            "namespaces": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["namespace", "version", "ranks", "waiters", "encoder_urls"],
                    "properties": {
                        "namespace": {"type": "string"},
                        "version": {"type": "integer", "minimum": 0},
                        "ranks": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "Ranks holding transfer-engine info of role target.",
                        },
                        "waiters": {"type": "integer", "minimum": 0, "description": "Waits parked now."},
                        "encoder_urls": {"type": "integer", "minimum": 0},
                    },
                },
            },
        },
    },
    "Listing": {
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
                    },
                },
            },
            "missing": {
                "type": ["array", "null"],
                "items": {"type": "integer"},
                "description": (
                    f"The ranks of [0, world_size) not registered, in order: all of them, or the first "
                    f"{wire.MISSING_LIST_MAX} when missing_truncated is true; null without a world size."
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
                "description": f"True when more than {wire.MISSING_LIST_MAX} ranks are missing.",
            },
        },
    },
}
