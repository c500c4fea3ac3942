"""The native face's OpenAPI description of ``GET /watch``: its parameters, its reply and its ``410``."""

from __future__ import annotations

from typing import Any

from ....wire.routes import MAX_BATCH_RANKS
from ....wire.watch import EVENT_STREAM, WATCH_PATH
from ...openapi.paths import RANKS, json_reply
from ...openapi.schemas import RANK, ROLE

__all__ = ["WATCH_SCHEMAS", "watch_paths"]


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


WATCH_SCHEMAS: dict[str, Any] = {
    "WatchedChange": {
        "type": "object",
        "required": ["op", "kind", "version"],
        "properties": {
            "op": {"type": "string", "enum": ["put", "delete"]},
            "kind": {"type": "string", "description": "A record kind, or encoder_urls."},
            "role": {"type": "string", "description": "Per-rank kinds only."},
            "rank": {"type": "integer", "description": "Per-rank kinds only."},
            "url": {"type": "string", "description": "encoder_urls only: the URL that joined or left."},
            "version": {"type": "integer", "description": "The namespace's version the change took."},
        },
    },
    "WatchReply": {
        "type": "object",
        "required": ["changes", "version"],
        "properties": {
            "changes": {"type": "array", "items": {"$ref": "#/components/schemas/WatchedChange"}},
            "version": {"type": "integer", "description": "Pass it as the next after."},
            "waits": {
                "type": "integer",
                "description": "Asked with waits: the server's count of waits parked or gone so far.",
            },
            "findings": {
                "type": "integer",
                "description": "Asked with findings: the count of probe rounds that changed a finding.",
            },
        },
    },
}


def watch_paths() -> dict[str, dict[str, Any]]:
    """The path item of ``GET /watch``."""
    reply = json_reply("The changes after `after`, oldest first (none when `wait` ran out).", "WatchReply")
    reply["content"][EVENT_STREAM] = {
        "schema": {"type": "string"},
        "description": "With Accept: text/event-stream: one event per change (id: its version, data: "
        "the change), resumed after Last-Event-ID, a comment line when quiet.",
    }
    return {
        WATCH_PATH: {
            "get": {
                "operationId": "watch",
                "summary": "Every change of the namespace after a version, as soon as there is one.",
                "parameters": [
                    _query(
                        "after",
                        "Changes with a greater version (0: every change kept).",
                        {**RANK, "default": 0},
                    ),
                    _query(
                        "wait",
                        "Seconds to hold the request until a change; clamped to --max-wait.",
                        {"type": "number", "minimum": 0, "default": 0},
                    ),
                    _query(
                        "kind",
                        "Only changes of this kind (a record kind, encoder_urls, or a face's named records: "
                        "prefill_rank, prefill_topology, prefill_room, metadata).",
                        {
                            "type": "string",
                            "enum": [
                                "transfer_engine_info",
                                "parallelism_config",
                                "encoder_urls",
                                "prefill_rank",
                                "prefill_topology",
                                "prefill_room",
                                "metadata",
                            ],
                        },
                    ),
                    _query("role", "Only changes of this role (per-rank kinds).", ROLE),
                    _query(
                        "waits",
                        "The `waits` of a /namespaces or watch reply: also answer, with no change, once a "
                        "wait has parked or gone on the server since (the bring-up page's).",
                        RANK,
                    ),
                    _query(
                        "findings",
                        "The `findings` of an /encoder_url_health or watch reply: also answer, with no "
                        "change, once this server's encoder probes found something else (the page's).",
                        RANK,
                    ),
                    _query(
                        "boot",
                        "The boot id (X-Aiobootstrap-Boot) `after` came from: another one is a 410 at once.",
                        {"type": "string"},
                    ),
                    {
                        **RANKS,
                        "required": False,
                        "description": "Only changes of these ranks (per-rank kinds), such as 0-7,12; "
                        f"at most {MAX_BATCH_RANKS} distinct ranks.",
                    },
                ],
                "responses": {
                    "200": reply,
                    "400": json_reply("A malformed parameter; the detail names it."),
                    "410": json_reply(
                        "The history kept no longer reaches back to `after`: read the listing, then "
                        "watch from its version. Beside detail, version: the namespace's version.",
                    ),
                    "503": json_reply("The server is shutting down, or its store does not answer."),
                },
            }
        }
    }
