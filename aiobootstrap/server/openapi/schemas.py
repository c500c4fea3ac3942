"""The OpenAPI component schemas every face may refer to, and those of the server's own routes.

:func:`ref` refers to a schema, :data:`RANK` and :data:`ROLE` are the
schemas of a rank and a role wherever they are given; :data:`SCHEMAS` holds
the error replies (``Error``, ``Missing``); :func:`namespaces_schema` is
``/namespaces``' reply, with a field for each count the faces declare
(``Face.counts``). Each face's own schemas are in its folder (``Face.schemas``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..._names import DEFAULT_ROLE, MAX_ROLE_LENGTH
from ..._ranks import MAX_RANK
from ...wire.routes import MISSING_LIST_MAX
from ..kind_spec import NamespaceCount

__all__ = ["RANK", "ROLE", "SCHEMAS", "namespaces_schema", "ref"]


def ref(name: str) -> dict[str, str]:
    """A reference to the component schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


RANK = {"type": "integer", "minimum": 0, "maximum": MAX_RANK}
"""A rank, in a query or a body; in a query, any integer (a version too): plain digits, at most as many as ``MAX_RANK`` has."""
ROLE = {"type": "string", "minLength": 1, "maxLength": MAX_ROLE_LENGTH, "default": DEFAULT_ROLE}
"""A role, in a query or a body."""


SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["detail"],
        "properties": {
            "detail": {"type": "string", "description": "One sentence saying what went wrong."},
            "error": {
                "type": "string",
                "description": "Only where a face answers as its engine's own server does: that server's "
                "error text.",
            },
            "code": {
                "type": "string",
                "description": (
                    "Which error this is where its status is several (a 409): the client raises the class "
                    "the code names."
                ),
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
                    f"The ranks still missing, in order: all of them, or the first {MISSING_LIST_MAX} "
                    "when missing_truncated is true."
                ),
            },
            "missing_ranks": {
                "type": "string",
                "description": "A batch's every missing rank as a rank set such as 0-3,8 (a batch 404 only).",
            },
            "missing_truncated": {
                "type": "boolean",
                "description": f"True when more than {MISSING_LIST_MAX} ranks are missing.",
            },
        },
    },
}


def namespaces_schema(counts: Iterable[NamespaceCount]) -> dict[str, Any]:
    """The ``Namespaces`` schema: ``/namespaces``' reply, a namespace's fields with each of ``counts``."""
    counted = {
        count.name: {
            "type": "integer",
            "minimum": 0,
            **({} if count.description is None else {"description": count.description}),
        }
        for count in counts
    }
    return {
        "type": "object",
        "required": ["namespaces"],
        "properties": {
            "waits": {
                "type": "integer",
                "minimum": 0,
                "description": "Moves of parked waits so far (parked or gone), for `?waits=` to follow them.",
            },
            "listeners": {
                "type": "array",
                "description": "With `--listen`: each listener the token may see, whose unprefixed routes are "
                "one namespace's (on a listener's port, its own alone).",
                "items": {
                    "type": "object",
                    "required": ["namespace", "url"],
                    "properties": {"namespace": {"type": "string"}, "url": {"type": "string"}},
                },
            },
            "listener": {
                "type": "string",
                "description": "On a `--listen` listener's port: the namespace it serves (the only one listed).",
            },
            "namespaces": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["namespace", "version", "waiters", *counted],
                    "properties": {
                        "namespace": {"type": "string"},
                        "version": {"type": "integer", "minimum": 0},
                        "waiters": {"type": "integer", "minimum": 0, "description": "Waits parked now."},
                        **counted,
                    },
                },
            },
        },
    }
