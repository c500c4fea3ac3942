"""The encoders face's OpenAPI description: the encoder URL routes and their bodies and replies."""

from __future__ import annotations

from typing import Any

from ....wire.routes import (
    ENCODER_HEALTH_PATH,
    ENCODER_LIST_PATH,
    ENCODER_REGISTER_PATH,
    ENCODER_UNREGISTER_PATH,
    JSON_TYPE,
)
from ...openapi.leases import LEASE_REPLIES, with_lease
from ...openapi.paths import (
    BAD_REQUEST,
    BODY_ERRORS,
    BOOT,
    SECONDS,
    UNAVAILABLE,
    json_reply,
    query,
    text_reply,
)
from ...openapi.schemas import RANK, ref

__all__ = ["PATHS", "SCHEMAS"]

_JSON = JSON_TYPE

PATHS: dict[str, dict[str, Any]] = {
    ENCODER_REGISTER_PATH: {
        "post": {
            "operationId": "registerEncoderUrl",
            "summary": "Add an encoder's URL to the list (listed once however often it registers, "
            "an evicted one at once); wakes the list's waiters.",
            "requestBody": {"required": True, "content": {_JSON: {"schema": ref("EncoderUrlRegistration")}}},
            "responses": {
                "200": text_reply("Listed."),
                "400": BAD_REQUEST,
                **BODY_ERRORS,
                "503": UNAVAILABLE,
                **LEASE_REPLIES,
            },
        }
    },
    ENCODER_UNREGISTER_PATH: {
        "delete": {
            "operationId": "unregisterEncoderUrl",
            "summary": "Remove an encoder's URL from the list and end its health probes; OK also when "
            "it was not listed.",
            "requestBody": {"required": True, "content": {_JSON: {"schema": ref("EncoderUrl")}}},
            "responses": {
                "200": text_reply("Not listed (any more)."),
                "400": BAD_REQUEST,
                **BODY_ERRORS,
                "503": UNAVAILABLE,
            },
        }
    },
    ENCODER_LIST_PATH: {
        "get": {
            "operationId": "listEncoderUrls",
            "summary": "The encoder URLs, in order of first registration, optionally once the list "
            "changed after a version.",
            "parameters": [
                query(
                    "wait",
                    "Seconds to hold the request until the list changes after `after`; clamped to "
                    "--max-wait. When it runs out, the list as it is.",
                    SECONDS,
                ),
                query(
                    "after",
                    "A version of the list (from an earlier reply): wait for a change after it.",
                    {**RANK, "default": 0},
                ),
                BOOT,
            ],
            "responses": {
                "200": json_reply("The list and its version.", "EncoderUrls"),
                "400": BAD_REQUEST,
                "503": UNAVAILABLE,
            },
        }
    },
    ENCODER_HEALTH_PATH: {
        "get": {
            "operationId": "encoderUrlHealth",
            "summary": "Each listed and evicted encoder URL with what this replica's health probes found "
            "(healthy, failing with its failures, evicted and for how long).",
            "responses": {
                "200": json_reply("The URLs and their health.", "EncoderUrlHealth"),
                "400": BAD_REQUEST,
                "503": UNAVAILABLE,
            },
        }
    },
}

SCHEMAS: dict[str, Any] = {
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
                        "state": {"enum": ["healthy", "failing", "unprobed", "evicted", "listed"]},
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
}
SCHEMAS["EncoderUrlRegistration"] = with_lease(SCHEMAS["EncoderUrl"])
