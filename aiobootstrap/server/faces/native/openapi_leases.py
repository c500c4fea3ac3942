"""The native face's OpenAPI description of leases (SPEC section 9): their four routes and their bodies.

The ``lease`` field of a register body, with the lease ``404`` and the ``501``
of a store that holds no leases, is each registering face's to describe
(with ``openapi/leases.py``'s builders).
"""

from __future__ import annotations

from typing import Any

from ....wire import leases as wire_leases
from ....wire.routes import JSON_TYPE
from ...openapi.leases import LEASE_GONE, LEASE_ID, NO_LEASES, TTL
from ...openapi.paths import BAD_REQUEST, BODY_ERRORS, json_reply
from ...openapi.schemas import ref

__all__ = ["PATHS", "SCHEMAS"]

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


SCHEMAS: dict[str, Any] = {
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


PATHS: dict[str, dict[str, Any]] = {
    wire_leases.LEASES_PATH: {
        "post": _operation(
            "grantLease",
            "Grant a lease of ttl seconds; records registered with its id live while it does.",
            {
                "200": json_reply("The lease.", "Lease"),
                "400": BAD_REQUEST,
                "409": json_reply("The server holds --max-leases leases."),
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
