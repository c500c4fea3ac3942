"""The OpenAPI builders every face describes its routes with, and the paths of the server's own routes.

A face describes its routes in its folder (``Face.paths``), with these:
:func:`json_reply`, :func:`text_reply`, :func:`query`, the replies any route
may give (:data:`BAD_REQUEST`, :data:`UNAVAILABLE`, :data:`BODY_ERRORS`) and
the parameters several faces take. ``document()`` describes each face path's
``/ns/{namespace}`` twin from it (:func:`in_namespace`). :data:`PATHS` are
the routes served once for the whole server (:data:`SERVER_WIDE`).
"""

from __future__ import annotations

import copy
from typing import Any

from ..._names import NAME_PATTERN
from ..._ranks import MAX_RANK
from ...wire.routes import (
    JSON_TYPE,
    MAX_BATCH_RANKS,
    METRICS_PATH,
    NAMESPACES_PATH,
    OPENAPI_PATH,
    READY_PATH,
    SERVER_WIDE_PATHS,
)
from .schemas import ROLE, ref

__all__ = [
    "BAD_REQUEST",
    "BODY_ERRORS",
    "BOOT",
    "PATHS",
    "RANKS",
    "RANKS_FORMAT",
    "ROLE_QUERY",
    "SECONDS",
    "SERVER_WIDE",
    "UNAVAILABLE",
    "in_namespace",
    "json_reply",
    "query",
    "text_reply",
]

_JSON = JSON_TYPE


def json_reply(description: str, schema: str = "Error") -> dict[str, Any]:
    """A JSON reply of the component schema ``schema`` (an error's ``{"detail": ...}`` unless told)."""
    return {"description": description, "content": {_JSON: {"schema": ref(schema)}}}


def text_reply(description: str, example: str = "OK") -> dict[str, Any]:
    """A ``text/plain`` reply (``OK`` unless told)."""
    return {
        "description": description,
        "content": {"text/plain": {"schema": {"type": "string"}, "example": example}},
    }


def query(name: str, description: str, schema: dict[str, Any], *, required: bool = False) -> dict[str, Any]:
    """A query parameter."""
    return {"name": name, "in": "query", "required": required, "description": description, "schema": schema}


BAD_REQUEST = json_reply("A malformed parameter or body; the detail names it.")
UNAVAILABLE = json_reply(
    "The server is shutting down, holds as many waits as it allows (with Retry-After), "
    "hosts as many namespaces as it allows, or its store does not answer (with Retry-After)."
)
BODY_ERRORS = {
    "408": json_reply("The body did not arrive within the server's --body-timeout."),
    "413": json_reply("The body is larger than the server's --max-body-size."),
    "415": json_reply("The body has a Content-Encoding; send it uncompressed."),
}
"""What reading any request body can answer."""

SECONDS = {"type": "number", "minimum": 0, "default": 0}
"""A wait in seconds: a finite non-negative decimal number (``1.5``, ``2e3``), no sign."""

BOOT = query(
    "boot",
    "The boot id (X-Aiobootstrap-Boot) that `after` came from: when the registry is another "
    "incarnation, `after` counts as 0 (its records are all news).",
    {"type": "string"},
)

ROLE_QUERY = query(
    "role",
    "The role whose records are meant (a speculative draft model's are apart from its target's).",
    ROLE,
)

RANKS_FORMAT = "aiobootstrap-ranks"
"""The ``format`` of a batch's ``ranks``: a pattern says its grammar, not that a range's end is not
below its start, nor how many ranks a batch may name."""
_DIGITS = f"[0-9]{{1,{len(str(MAX_RANK))}}}"
_RANK_PART = rf"\s*{_DIGITS}(-{_DIGITS})?\s*"
"""One rank or range; the server strips white space around each."""
RANKS = query(
    "ranks",
    "The ranks: comma-separated ranks and inclusive ranges, such as 0-7,12; a range's end is not "
    f"below its start, and a batch names at most {MAX_BATCH_RANKS} distinct ranks.",
    {
        "type": "string",
        "format": RANKS_FORMAT,
        "pattern": f"^{_RANK_PART}(,{_RANK_PART})*$",
        "example": "0-7,12",
    },
    required=True,
)


PATHS: dict[str, dict[str, Any]] = {
    READY_PATH: {
        "get": {
            "operationId": "ready",
            "summary": "Whether the server's store answers (readiness, for a load balancer).",
            "responses": {
                "200": text_reply("The store answers."),
                "503": json_reply("The store does not answer; Retry-After says when to ask again."),
            },
        }
    },
    METRICS_PATH: {
        "get": {
            "operationId": "metrics",
            "summary": "Every metric of the server, all namespaces, in the Prometheus text format.",
            "responses": {
                "200": text_reply("The metrics.", 'aiobootstrap_gets_total{outcome="hit"} 3.0'),
                "503": json_reply("The store does not answer; Retry-After says when to ask again."),
            },
        }
    },
    NAMESPACES_PATH: {
        "get": {
            "operationId": "listNamespaces",
            "summary": "Every namespace holding records or parked waits, in order of name; with tokens, "
            "the ones the token covers.",
            "responses": {
                "200": json_reply("The namespaces.", "Namespaces"),
                "503": UNAVAILABLE,
            },
        }
    },
    OPENAPI_PATH: {
        "get": {
            "operationId": "openapi",
            "summary": "This description.",
            "responses": {
                "200": {
                    "description": "An OpenAPI 3.1 document.",
                    "content": {_JSON: {"schema": {"type": "object"}}},
                },
            },
        }
    },
}

SERVER_WIDE = SERVER_WIDE_PATHS
"""Paths served once for the whole server, not under each namespace (the wire's set)."""

_NAMESPACE = {
    "name": "namespace",
    "in": "path",
    "required": True,
    "description": "The namespace (one deployment). The unprefixed routes are the namespace default.",
    "schema": {"type": "string", "pattern": f"^{NAME_PATTERN.pattern}$"},
}


def in_namespace(item: dict[str, Any]) -> dict[str, Any]:
    """A path's ``/ns/{namespace}`` twin: its operations, renamed, with the namespace parameter."""
    item = copy.deepcopy(item)
    for operation in item.values():
        operation["operationId"] += "InNamespace"
        operation["parameters"] = [_NAMESPACE, *operation.get("parameters", [])]
        operation["responses"].setdefault("400", BAD_REQUEST)
        operation["responses"].setdefault("503", UNAVAILABLE)
    return item
