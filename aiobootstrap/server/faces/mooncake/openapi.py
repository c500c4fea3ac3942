"""The Mooncake face's OpenAPI description: ``/metadata?key=K``."""

from __future__ import annotations

from typing import Any

from ....store import MAX_NAME_LENGTH
from ....wire.metadata import LEASE_HEADER, METADATA_PATH, MOONCAKE_LISTING_PATH
from ...openapi.leases import LEASE_REPLIES
from ...openapi.paths import BODY_ERRORS, SECONDS, UNAVAILABLE, query, text_reply
from ...openapi.schemas import RANK, ref

__all__ = ["PATHS", "SCHEMAS"]

_KEY = query(
    "key",
    "The key, any non-empty string (the engines send mooncake/ram/<segment>, mooncake/rpc_meta/<name>).",
    {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH},
    required=True,
)
_MISSING_KEY = {
    "description": "No key (Mooncake's text), or a malformed parameter (JSON).",
    "content": {
        "text/plain": {"schema": {"type": "string"}, "example": "metadata key is required"},
        "application/json": {"schema": ref("Error")},
    },
}
_NOT_FOUND = text_reply("No value under that key.", "metadata not found")

PATHS: dict[str, dict[str, Any]] = {
    METADATA_PATH: {
        "get": {
            "operationId": "getMetadata",
            "summary": "The value last stored under a key, byte for byte; with wait, once it exists (or changes after after).",
            "parameters": [
                _KEY,
                query(
                    "wait",
                    "Seconds to hold the request until the key exists (or changes after after); clamped to --max-wait.",
                    SECONDS,
                ),
                query(
                    "after",
                    "A version of the key (from X-Aiobootstrap-Version): wait for a change after it.",
                    {**RANK, "default": 0},
                ),
            ],
            "responses": {
                "200": {
                    "description": "The value, as it was stored.",
                    "content": {"application/json": {"schema": {}}},
                },
                "400": _MISSING_KEY,
                "404": _NOT_FOUND,
                "503": UNAVAILABLE,
            },
        },
        "put": {
            "operationId": "putMetadata",
            "summary": "Store a value under a key; an engine's RPC entry (a key holding rpc_meta) is never taken over.",
            "parameters": [
                _KEY,
                {
                    "name": LEASE_HEADER,
                    "in": "header",
                    "required": False,
                    "description": "Put the key on this lease (empty: on none).",
                    "schema": {"type": "string"},
                },
            ],
            "requestBody": {
                "required": False,  # an empty value is a value, as Mooncake's server keeps it
                "content": {"application/json": {"schema": ref("MetadataValue")}},
            },
            "responses": {
                "200": text_reply(
                    "Stored (metadata updated), or the same RPC entry again (metadata unchanged).",
                    "metadata updated",
                ),
                "400": {
                    "description": "No key, another engine's RPC entry (Duplicate rpc_meta key not allowed), or a malformed parameter (JSON).",
                    "content": {
                        "text/plain": {"schema": {"type": "string"}},
                        "application/json": {"schema": ref("Error")},
                    },
                },
                **BODY_ERRORS,
                "503": UNAVAILABLE,
                **LEASE_REPLIES,
            },
        },
        "delete": {
            "operationId": "deleteMetadata",
            "summary": "Forget a key: an engine's at its normal exit, and both keys of a client whose heartbeat "
            "timed out, from Mooncake's store master (--enable_metadata_cleanup_on_timeout).",
            "parameters": [_KEY],
            "responses": {
                "200": text_reply("Deleted.", "metadata deleted"),
                "400": _MISSING_KEY,
                "404": _NOT_FOUND,
                "503": UNAVAILABLE,
            },
        },
    }
}

PATHS[MOONCAKE_LISTING_PATH] = {
    "get": {
        "operationId": "listMooncake",
        "summary": "The namespace's Mooncake engines: each one's name, RPC address, whether its segment is "
        "registered and with how many buffers, and (with probing on) its failed probes in a row.",
        "responses": {
            "200": {
                "description": "The engines.",
                "content": {"application/json": {"schema": ref("MooncakeEngines")}},
            },
            "400": {
                "description": "A malformed namespace.",
                "content": {"application/json": {"schema": ref("Error")}},
            },
            "503": UNAVAILABLE,
        },
    }
}

SCHEMAS: dict[str, Any] = {
    "MooncakeEngines": {
        "type": "object",
        "required": ["keys", "probing", "engines", "engine_count"],
        "properties": {
            "keys": {"type": "integer", "minimum": 0},
            "probing": {"type": "boolean"},
            "engines": {"type": "array", "items": {"type": "object"}, "description": "At most 4,096."},
            "engine_count": {"type": "integer", "minimum": 0},
        },
    },
    "MetadataValue": {
        "description": "Any body up to the server's --max-body-size, kept and served back byte for byte."
    },
}
