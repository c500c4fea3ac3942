"""What a face's register routes say of leases (SPEC section 9): the ``lease`` body field and its replies.

A face whose register body takes a ``lease`` (read with
``wire.leases.parse_lease_field``) describes it with these: :func:`with_lease`
on its body's schema, :data:`LEASE_REPLIES` among its replies. The lease
routes themselves are the native face's (``faces/native/openapi.py``).
"""

from __future__ import annotations

import copy
from typing import Any

from ...wire import leases as wire_leases
from .paths import json_reply

__all__ = ["LEASE_GONE", "LEASE_ID", "LEASE_REPLIES", "NO_LEASES", "TTL", "with_lease"]

LEASE_ID = {"type": "string", "minLength": 1, "description": "The lease id POST /leases answered."}
"""A lease id, in a path or a body."""
TTL = {
    "type": "number",
    "minimum": wire_leases.MIN_TTL,
    "maximum": wire_leases.MAX_TTL,
    "description": "Seconds the lease lives unless kept alive.",
}
LEASE_GONE = json_reply("No such lease: it expired or was revoked; `lease` beside the detail names it.")
NO_LEASES = json_reply("The server's store holds no leases yet (Redis): register without a lease.")
LEASE_REPLIES = {"404": LEASE_GONE, "501": NO_LEASES}
"""What a register naming a lease may answer besides its own replies."""


def with_lease(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of the register body ``schema`` with its ``lease`` field."""
    schema = copy.deepcopy(schema)
    lease = {**LEASE_ID, "type": ["string", "null"], "description": "Put it on a lease (null: none)."}
    schema["properties"] = {**schema["properties"], "lease": lease}
    return schema
