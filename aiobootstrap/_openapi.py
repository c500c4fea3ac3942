"""The OpenAPI description of every route, served at ``GET /openapi.json``.

Written by hand, so it says what the routes mean, and kept true by
``tests/test_openapi.py``, which fails for any route the app serves that is
not described here. To describe a new route, add its path to ``_PATHS``; its
``/ns/{namespace}`` twin is described from it unless the path is in
``_SERVER_WIDE``.
"""

from __future__ import annotations

import copy
from typing import Any

from aiohttp import web

from . import __version__
from . import _protocol as protocol

__all__ = ["document", "openapi"]

_JSON = protocol.JSON_TYPE


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, schema: str = "Error") -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": _ref(schema)}}}


def _text(description: str, example: str = "OK") -> dict[str, Any]:
    return {
        "description": description,
        "content": {"text/plain": {"schema": {"type": "string"}, "example": example}},
    }


def _query(name: str, description: str, schema: dict[str, Any], *, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "description": description, "schema": schema}


_BAD_REQUEST = _json("A malformed parameter or body; the detail names it.")
_UNAUTHORIZED = _json("A token is required and was missing or wrong.")
_UNAVAILABLE = _json(
    "The server is shutting down, holds as many waits as it allows (with Retry-After), "
    "or hosts as many namespaces as it allows."
)

_WAIT = _query(
    "wait",
    "Seconds to hold the request until the rank(s) register; 0 (the default) answers at once. "
    "Clamped to the server's --max-wait.",
    {"type": "number", "minimum": 0, "default": 0},
)
_AFTER = _query(
    "after",
    "Only a registration with a greater version counts (to wait for a restarted rank's new info).",
    {"type": "integer", "minimum": 0, "default": 0},
)

_PATHS: dict[str, dict[str, Any]] = {
    protocol.HEALTH_PATH: {
        "get": {
            "operationId": "health",
            "summary": "Whether the server is up.",
            "responses": {"200": _text("The server is up.")},
        }
    },
    protocol.READY_PATH: {
        "get": {
            "operationId": "ready",
            "summary": "Whether the server's store answers (readiness, for a load balancer).",
            "responses": {
                "200": _text("The store answers."),
                "401": _UNAUTHORIZED,
                "503": _json("The store does not answer; Retry-After says when to ask again."),
            },
        }
    },
    protocol.REGISTER_PATH: {
        "put": {
            "operationId": "register",
            "summary": "Publish a rank's info, replacing any earlier one, and wake its waiters.",
            "requestBody": {"required": True, "content": {_JSON: {"schema": _ref("Registration")}}},
            "responses": {
                "200": _text("Registered."),
                "400": _BAD_REQUEST,
                "401": _UNAUTHORIZED,
                "408": _json("The body did not arrive within the server's --body-timeout."),
                "409": _json("A new rank past the server's --max-ranks (no world size set)."),
                "413": _json("The body is larger than the server's --max-body-size."),
                "415": _json("The body has a Content-Encoding; send it uncompressed."),
                "503": _UNAVAILABLE,
            },
        },
        "delete": {
            "operationId": "unregister",
            "summary": "Remove a rank's info; its waiters go on waiting for a new registration.",
            "parameters": [_query("rank", "The rank.", {"type": "integer", "minimum": 0}, required=True)],
            "responses": {
                "200": _text("Removed."),
                "400": _BAD_REQUEST,
                "401": _UNAUTHORIZED,
                "404": _json(
                    "The rank was not registered: `No transfer engine info for rank N`, `missing: [N]`.",
                    "Missing",
                ),
                "503": _UNAVAILABLE,
            },
        },
    },
    protocol.GET_PATH: {
        "get": {
            "operationId": "getInfo",
            "summary": "A rank's transfer-engine info, optionally waiting for it to register.",
            "parameters": [
                _query("rank", "The rank.", {"type": "integer", "minimum": 0}, required=True),
                _WAIT,
                _AFTER,
            ],
            "responses": {
                "200": _json("The rank's info.", "Info"),
                "400": _BAD_REQUEST,
                "401": _UNAUTHORIZED,
                "404": _json(
                    "Not registered (when the wait ran out): `No transfer engine info for rank N`, `missing: [N]`.",
                    "Missing",
                ),
                "503": _UNAVAILABLE,
            },
        }
    },
    protocol.BATCH_PATH: {
        "get": {
            "operationId": "getInfoBatch",
            "summary": "Several ranks' info in one request, waiting until all of them have registered.",
            "parameters": [
                _query(
                    "ranks",
                    "The ranks: comma-separated ranks and inclusive ranges, such as 0-7,12.",
                    {"type": "string", "example": "0-7,12"},
                    required=True,
                ),
                _WAIT,
                _AFTER,
            ],
            "responses": {
                "200": _json("Every asked rank's info.", "Batch"),
                "400": _BAD_REQUEST,
                "401": _UNAUTHORIZED,
                "404": _json(
                    "Some ranks are not registered (when the wait ran out); listed in missing.", "Missing"
                ),
                "503": _UNAVAILABLE,
            },
        }
    },
    protocol.RANKS_PATH: {
        "get": {
            "operationId": "listRanks",
            "summary": "The registered ranks (without weights) and, with a world size, the missing ones.",
            "responses": {"200": _json("The listing.", "Listing"), "401": _UNAUTHORIZED},
        }
    },
    protocol.METRICS_PATH: {
        "get": {
            "operationId": "metrics",
            "summary": "Every metric of the server, all namespaces, in the Prometheus text format.",
            "responses": {
                "200": _text("The metrics.", 'aiobootstrap_gets_total{outcome="hit"} 3.0'),
                "401": _UNAUTHORIZED,
            },
        }
    },
    protocol.OPENAPI_PATH: {
        "get": {
            "operationId": "openapi",
            "summary": "This description.",
            "responses": {"200": {"description": "An OpenAPI 3.1 document.", "content": {_JSON: {}}}},
        }
    },
}

_SERVER_WIDE = frozenset({protocol.READY_PATH, protocol.METRICS_PATH, protocol.OPENAPI_PATH})
"""Paths served once for the whole server, not under each namespace."""

_NAMESPACE = {
    "name": "namespace",
    "in": "path",
    "required": True,
    "description": "The namespace (one deployment). The unprefixed routes are the namespace default.",
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"},
}

_OBJECT = {"type": "object", "additionalProperties": True}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["detail"],
        "properties": {"detail": {"type": "string", "description": "One sentence saying what went wrong."}},
    },
    "Missing": {
        "type": "object",
        "required": ["detail", "missing"],
        "properties": {
            "detail": {"type": "string"},
            "missing": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "The ranks still missing.",
            },
        },
    },
    "Registration": {
        "type": "object",
        "required": ["transfer_engine_info"],
        "description": "Give rank (or, from older clients, tp_rank; rank wins when both are present).",
        "properties": {
            "rank": {"type": "integer", "minimum": 0},
            "tp_rank": {"type": "integer", "minimum": 0},
            "transfer_engine_info": {
                "type": "object",
                "required": ["session_id", "weights_info_dict"],
                "properties": {"session_id": {"type": "string"}, "weights_info_dict": _OBJECT},
            },
        },
    },
    "Info": {
        "type": "object",
        "required": ["rank", "remote_instance_transfer_engine_info", "version"],
        "properties": {
            "rank": {"type": "integer"},
            "remote_instance_transfer_engine_info": {
                "type": "array",
                "description": "[session_id, weights_info_dict]",
                "prefixItems": [{"type": "string"}, _OBJECT],
                "minItems": 2,
                "maxItems": 2,
            },
            "version": {"type": "integer", "description": "Grows with every change in the namespace."},
        },
    },
    "Batch": {
        "type": "object",
        "required": ["infos", "version"],
        "properties": {"infos": {"type": "array", "items": _ref("Info")}, "version": {"type": "integer"}},
    },
    "Listing": {
        "type": "object",
        "required": ["version", "world_size", "count", "ranks", "missing"],
        "properties": {
            "version": {"type": "integer"},
            "world_size": {"type": ["integer", "null"]},
            "count": {"type": "integer"},
            "ranks": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "rank": {"type": "integer"},
                        "session_id": {"type": "string"},
                        "version": {"type": "integer"},
                        "registered_at": {"type": "number", "description": "Unix time of the registration."},
                        "age": {"type": "number", "description": "Seconds since the registration."},
                    },
                },
            },
            "missing": {"type": ["array", "null"], "items": {"type": "integer"}},
        },
    },
}


def _in_namespace(item: dict[str, Any]) -> dict[str, Any]:
    item = copy.deepcopy(item)
    for operation in item.values():
        operation["operationId"] += "InNamespace"
        operation["parameters"] = [_NAMESPACE, *operation.get("parameters", [])]
        operation["responses"].setdefault("400", _BAD_REQUEST)
        operation["responses"].setdefault("503", _UNAVAILABLE)
    return item


def document() -> dict[str, Any]:
    """The OpenAPI document of every route."""
    paths: dict[str, Any] = {}
    for route, item in _PATHS.items():
        paths[route] = item
        if route not in _SERVER_WIDE:
            paths[protocol.path(route, "{namespace}")] = _in_namespace(item)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "aiobootstrap",
            "version": __version__,
            "description": "A long-poll rendezvous server for the ranks of a distributed inference engine. "
            'Every error reply is JSON {"detail": ...}.',
        },
        "paths": paths,
        "components": {"schemas": _SCHEMAS},
    }


async def openapi(request: web.Request) -> web.Response:
    """``GET /openapi.json``."""
    return web.Response(body=protocol.dumps(document()), content_type=_JSON)
