"""The OpenAPI description of leases (SPEC section 9): their four routes, and ``lease`` in every register body.

:func:`describe_leases` adds them to a document's paths and schemas as
``document()`` builds it: the lease routes, and on every register route the
``lease`` body field with the lease ``404`` and the ``501`` of a store that
holds no leases.
"""

from __future__ import annotations

import copy
from typing import Any

from ... import wire
from ...wire import leases as wire_leases
from .schemas import ref

__all__ = ["describe_leases"]

_JSON = wire.JSON_TYPE
_TTL = {
    "type": "number",
    "minimum": wire_leases.MIN_TTL,
    "maximum": wire_leases.MAX_TTL,
    "description": "Seconds the lease lives unless kept alive.",
}
_ID = {"type": "string", "minLength": 1, "description": "The lease id POST /leases answered."}


def _reply(description: str, schema: str = "Error") -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": ref(schema)}}}


def _body(schema: str) -> dict[str, Any]:
    return {"required": True, "content": {_JSON: {"schema": ref(schema)}}}


_BODY_ERRORS = {
    "408": _reply("The body did not arrive within the server's --body-timeout."),
    "413": _reply("The body is larger than the server's --max-body-size."),
    "415": _reply("The body has a Content-Encoding; send it uncompressed."),
}
_GONE = _reply("No such lease: it expired or was revoked; `lease` beside the detail names it.")
_UNSUPPORTED = _reply("The server's store holds no leases yet (Redis): register without a lease.")
_BAD = _reply("A malformed parameter or body; the detail names it.")
_PATH_ID = {"name": "lease", "in": "path", "required": True, "description": "The lease id.", "schema": _ID}


SCHEMAS: dict[str, Any] = {
    "LeaseGrant": {"type": "object", "required": ["ttl"], "properties": {"ttl": _TTL}},
    "Lease": {
        "type": "object",
        "required": ["lease", "ttl"],
        "properties": {"lease": _ID, "ttl": _TTL},
    },
    "LeaseState": {
        "type": "object",
        "required": ["lease", "ttl", "remaining", "records"],
        "properties": {
            "lease": _ID,
            "ttl": _TTL,
            "remaining": {"type": "number", "description": "Seconds until it expires unless kept alive."},
            "records": {
                "type": "array",
                "description": "The records on the lease: kind, role and rank; an encoder URL's kind and url.",
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
        "responses": {**responses, "501": _UNSUPPORTED, "503": _reply("The store does not answer.")},
    }


def _on_lease(operation_id: str, summary: str, done: dict[str, Any]) -> dict[str, Any]:
    """An operation on one lease: its id in the path, ``done`` its 200, the lease 404."""
    return _operation(operation_id, summary, {"200": done, "404": _GONE}, parameters=[_PATH_ID])


PATHS: dict[str, dict[str, Any]] = {
    wire_leases.LEASES_PATH: {
        "post": _operation(
            "grantLease",
            "Grant a lease of ttl seconds; records registered with its id live while it does.",
            {
                "200": _reply("The lease.", "Lease"),
                "400": _BAD,
                "409": _reply("The server holds --max-leases leases."),
                **_BODY_ERRORS,
            },
            requestBody=_body("LeaseGrant"),
        )
    },
    wire_leases.LEASE_KEEPALIVE_ROUTE: {
        "post": _on_lease(
            "keepaliveLease", "Give the lease its full TTL again, from now.", _reply("The lease.", "Lease")
        )
    },
    wire_leases.LEASE_ROUTE: {
        "get": _on_lease(
            "readLease",
            "The lease: its TTL, the seconds left and the records on it.",
            _reply("The lease.", "LeaseState"),
        ),
        "delete": _on_lease(
            "revokeLease",
            "Revoke the lease: every record on it is deleted now, as an unregister deletes it.",
            {"description": "Revoked.", "content": {"text/plain": {"schema": {"type": "string"}}}},
        ),
    },
}


def describe_leases(paths: dict[str, Any], schemas: dict[str, Any], register_paths: list[str]) -> None:
    """Add the lease routes and schemas; give each register route of ``register_paths`` its ``lease``."""
    paths.update(copy.deepcopy(PATHS))
    schemas.update(copy.deepcopy(SCHEMAS))
    schemas["EncoderUrlRegistration"] = copy.deepcopy(schemas["EncoderUrl"])
    paths[wire.ENCODER_REGISTER_PATH]["post"]["requestBody"] = _body("EncoderUrlRegistration")
    for name, schema in list(schemas.items()):
        if name.endswith("Registration"):
            schemas[name] = schema = copy.deepcopy(schema)
            schema["properties"] = {
                **schema["properties"],
                "lease": {
                    **_ID,
                    "type": ["string", "null"],
                    "description": "Put it on a lease (null: none).",
                },
            }
    listing = schemas["Listing"] = copy.deepcopy(schemas["Listing"])
    listing["properties"]["ranks"]["items"]["properties"].update(
        lease={"type": "string", "description": "The lease the record is on (only when on one)."},
        lease_remaining={
            "type": "number",
            "description": "Seconds until that lease expires unless kept alive.",
        },
    )
    for route in register_paths:
        for method in ("put", "post"):
            operation = paths[route].get(method)
            if operation is not None:
                operation["responses"] = {**operation["responses"], "404": _GONE, "501": _UNSUPPORTED}
