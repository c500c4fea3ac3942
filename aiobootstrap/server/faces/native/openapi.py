"""The native face's OpenAPI description: the health probe, the page, ``GET /watch`` (its
parameters, its reply and its ``410``) and the leases (SPEC section 9: their four routes and
their bodies).

The ``lease`` field of a register body, with the lease ``404`` and the ``501``
of a store that holds no leases, is each registering face's to describe
(with ``openapi/leases.py``'s builders).
"""

from __future__ import annotations

from typing import Any

from ....wire import leases as wire_leases
from ....wire.routes import HEALTH_PATH, JSON_TYPE, MAX_BATCH_RANKS, PAGE_PATH
from ....wire.watch import EVENT_STREAM, WATCH_PATH
from ...openapi.leases import LEASE_GONE, LEASE_ID, NO_LEASES, TTL
from ...openapi.paths import BAD_REQUEST, BODY_ERRORS, RANKS, json_reply, query, text_reply
from ...openapi.schemas import RANK, ROLE, ref

__all__ = ["paths", "schemas"]


_WATCH_SCHEMAS: dict[str, Any] = {
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


def _watch_paths() -> dict[str, dict[str, Any]]:
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
                    query(
                        "after",
                        "Changes with a greater version (0: every change kept).",
                        {**RANK, "default": 0},
                    ),
                    query(
                        "wait",
                        "Seconds to hold the request until a change; clamped to --max-wait.",
                        {"type": "number", "minimum": 0, "default": 0},
                    ),
                    query(
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
                    query("role", "Only changes of this role (per-rank kinds).", ROLE),
                    query(
                        "waits",
                        "The `waits` of a /namespaces or watch reply: also answer, with no change, once a "
                        "wait has parked or gone on the server since (the bring-up page's).",
                        RANK,
                    ),
                    query(
                        "findings",
                        "The `findings` of an /encoder_url_health or watch reply: also answer, with no "
                        "change, once this server's encoder probes found something else (the page's).",
                        RANK,
                    ),
                    query(
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


_JSON = JSON_TYPE


def _body(schema: str) -> dict[str, Any]:
    return {"required": True, "content": {_JSON: {"schema": ref(schema)}}}


_PATH_ID = {
    "name": "lease",
    "in": "path",
    "required": True,
    "description": "The lease id.",
    "schema": LEASE_ID,
}


_LEASE_SCHEMAS: dict[str, Any] = {
    "LeaseGrant": {"type": "object", "required": ["ttl"], "properties": {"ttl": TTL}},
    "Lease": {
        "type": "object",
        "required": ["lease", "ttl"],
        "properties": {"lease": LEASE_ID, "ttl": TTL},
    },
    "LeaseState": {
        "type": "object",
        "required": ["lease", "ttl", "remaining", "records"],
        "properties": {
            "lease": LEASE_ID,
            "ttl": TTL,
            "remaining": {"type": "number", "description": "Seconds until it expires unless kept alive."},
            "records": {
                "type": "array",
                "description": "The records on the lease: kind, role and rank; an encoder URL's kind and url; a named "
                "record's (a Mooncake key's, a prefill rank's) kind and key.",
                "items": {"type": "object"},
            },
        },
    },
}


def _operation(operation_id: str, summary: str, responses: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "summary": summary,
        **more,
        "responses": {**responses, "501": NO_LEASES, "503": json_reply("The store does not answer.")},
    }


def _on_lease(operation_id: str, summary: str, done: dict[str, Any]) -> dict[str, Any]:
    """An operation on one lease: its id in the path, ``done`` its 200, the lease 404."""
    return _operation(operation_id, summary, {"200": done, "404": LEASE_GONE}, parameters=[_PATH_ID])


_LEASE_PATHS: dict[str, dict[str, Any]] = {
    wire_leases.LEASES_PATH: {
        "post": _operation(
            "grantLease",
            "Grant a lease of ttl seconds; records registered with its id live while it does.",
            {
                "200": json_reply("The lease.", "Lease"),
                "400": BAD_REQUEST,
                "409": json_reply(
                    "The server holds --max-leases leases, or this namespace its share of them (half of what the "
                    "other namespaces leave free)."
                ),
                **BODY_ERRORS,
            },
            requestBody=_body("LeaseGrant"),
        )
    },
    wire_leases.LEASE_KEEPALIVE_ROUTE: {
        "post": _on_lease(
            "keepaliveLease",
            "Give the lease its full TTL again, from now.",
            json_reply("The lease.", "Lease"),
        )
    },
    wire_leases.LEASE_ROUTE: {
        "get": _on_lease(
            "readLease",
            "The lease: its TTL, the seconds left and the records on it.",
            json_reply("The lease.", "LeaseState"),
        ),
        "delete": _on_lease(
            "revokeLease",
            "Revoke the lease: every record on it is deleted now, as an unregister deletes it.",
            {"description": "Revoked.", "content": {"text/plain": {"schema": {"type": "string"}}}},
        ),
    },
}


def paths() -> dict[str, dict[str, Any]]:
    """The native face's routes."""
    return {
        HEALTH_PATH: {
            "get": {
                "operationId": "health",
                "summary": "Whether the server is up.",
                "responses": {"200": text_reply("The server is up.")},
            }
        },
        PAGE_PATH: {
            "get": {
                "operationId": "page",
                "summary": "The bring-up page for a browser: every rank of each kind and role, live from /watch "
                "(one HTML file, its script and style inline; it reads the API with the token it asks for).",
                "responses": {
                    "200": {
                        "description": "The page.",
                        "content": {"text/html": {"schema": {"type": "string"}}},
                    },
                },
            }
        },
        **_watch_paths(),
        **_LEASE_PATHS,
    }


def schemas() -> dict[str, Any]:
    """What the native face's routes take and answer."""
    return {**_WATCH_SCHEMAS, **_LEASE_SCHEMAS}
