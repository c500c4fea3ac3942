"""The OpenAPI description of every route, served at ``GET /openapi.json``.

Written by hand, so it says what the routes mean, and kept true by
``tests/test_openapi.py``, which fails for any route the app serves that is
not described here. To describe a new route, add its path to ``_PATHS``; its
``/ns/{namespace}`` twin is described from it unless the path is in
``_SERVER_WIDE``. A record kind's routes and schemas are described from its
entry in the kind table (``_kinds.KINDS``).
"""

from __future__ import annotations

import copy
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from .. import wire as protocol
from .._json import dumps
from .._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from .._ranks import MAX_RANK
from .._version import __version__
from ..wire import ENCODER_LIST_PATH, ENCODER_REGISTER_PATH, ENCODER_UNREGISTER_PATH
from . import kinds as _kinds
from .kinds import RecordKind

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
_SECURITY_SCHEME = "bearerAuth"
"""The one security scheme: ``Authorization: Bearer <token>``, when the server has a token."""
_UNAUTHORIZED = _json("A token is required and was missing or wrong.")
_UNAVAILABLE = _json(
    "The server is shutting down, holds as many waits as it allows (with Retry-After), "
    "hosts as many namespaces as it allows, or its store does not answer (with Retry-After)."
)
_BODY_ERRORS = {
    "408": _json("The body did not arrive within the server's --body-timeout."),
    "413": _json("The body is larger than the server's --max-body-size."),
    "415": _json("The body has a Content-Encoding; send it uncompressed."),
}
"""What reading any request body can answer."""

_QUERY_INTEGER = {"type": "integer", "minimum": 0, "maximum": MAX_RANK}
"""An integer query parameter (a rank, a version): plain digits, at most as many as ``MAX_RANK`` has."""
_SECONDS = {"type": "number", "minimum": 0, "default": 0}
"""A wait in seconds: a finite non-negative decimal number (``1.5``, ``2e3``), no sign."""

_WAIT = _query(
    "wait",
    "Seconds to hold the request until the rank(s) register; 0 (the default) answers at once. "
    "Clamped to the server's --max-wait.",
    _SECONDS,
)
_AFTER = _query(
    "after",
    "Only a registration with a greater version counts (to wait for a restarted rank's new info).",
    {**_QUERY_INTEGER, "default": 0},
)

_ROLE = _query(
    "role",
    "The role whose records are meant (a speculative draft model's are apart from its target's).",
    {"type": "string", "minLength": 1, "default": DEFAULT_ROLE},
)
_FORM = _query(
    "form",
    "object: serve each registration whole, as the object it was; list (the default): the kind's "
    "usual shape (for classic transfer-engine info, [session_id, weights_info_dict]).",
    {"type": "string", "enum": list(protocol.FORMS), "default": "list"},
)
_RANK = _query("rank", "The rank.", _QUERY_INTEGER, required=True)

RANKS_FORMAT = "aiobootstrap-ranks"
"""The ``format`` of a batch's ``ranks``: a pattern says its grammar, not that a range's end is not
below its start, nor how many ranks a batch may name."""
_DIGITS = f"[0-9]{{1,{len(str(MAX_RANK))}}}"
_RANK_PART = rf"\s*{_DIGITS}(-{_DIGITS})?\s*"
"""One rank or range; the server strips white space around each."""
_RANKS = _query(
    "ranks",
    "The ranks: comma-separated ranks and inclusive ranges, such as 0-7,12; a range's end is not "
    f"below its start, and a batch names at most {protocol.MAX_BATCH_RANKS} distinct ranks.",
    {
        "type": "string",
        "format": RANKS_FORMAT,
        "pattern": f"^{_RANK_PART}(,{_RANK_PART})*$",
        "example": "0-7,12",
    },
    required=True,
)


def _kind_paths(kind: RecordKind) -> dict[str, dict[str, Any]]:
    """The four operations of a per-rank record kind, from its table entry."""
    title, noun = kind.title, kind.noun
    absent = f"`{kind.absent(0).replace(' 0', ' N')}`"
    return {
        kind.register_path: {
            "put": {
                "operationId": f"register{title}",
                "summary": f"Publish a rank's {noun}, replacing any earlier one of its role, and wake its waiters.",
                "requestBody": {
                    "required": True,
                    "content": {_JSON: {"schema": _ref(f"{title}Registration")}},
                },
                "responses": {
                    "200": _text("Registered."),
                    "400": _BAD_REQUEST,
                    **_BODY_ERRORS,
                    "409": _json("A new rank past the server's --max-ranks (no world size set)."),
                    "503": _UNAVAILABLE,
                },
            },
            "delete": {
                "operationId": f"unregister{title}",
                "summary": f"Remove a rank's {noun}; its waiters go on waiting for a new registration.",
                "parameters": [_RANK, _ROLE],
                "responses": {
                    "200": _text("Removed."),
                    "400": _BAD_REQUEST,
                    "404": _json(f"The rank was not registered: {absent}, `missing: [N]`.", "Missing"),
                    "503": _UNAVAILABLE,
                },
            },
        },
        kind.get_path: {
            "get": {
                "operationId": f"get{title}",
                "summary": f"A rank's {noun}, optionally waiting for it to register. The "
                "X-Aiobootstrap-Version header carries the record's version.",
                "parameters": [_RANK, _ROLE, _WAIT, _AFTER, _FORM],
                "responses": {
                    "200": _json(f"The rank's {noun}.", title),
                    "400": _BAD_REQUEST,
                    "404": _json(
                        f"Not registered (when the wait ran out): {absent}, `missing: [N]`.", "Missing"
                    ),
                    "503": _UNAVAILABLE,
                },
            }
        },
        kind.batch_path: {
            "get": {
                "operationId": f"get{title}Batch",
                "summary": f"Several ranks' {noun} in one request, waiting until all of them have registered.",
                "parameters": [
                    _RANKS,
                    _ROLE,
                    _WAIT,
                    _AFTER,
                    _FORM,
                ],
                "responses": {
                    "200": _json(f"Every asked rank's {noun}.", f"{title}Batch"),
                    "400": _BAD_REQUEST,
                    "404": _json(
                        "Some ranks are not registered (when the wait ran out); listed in missing.", "Missing"
                    ),
                    "503": _UNAVAILABLE,
                },
            }
        },
    }


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
                "503": _json("The store does not answer; Retry-After says when to ask again."),
            },
        }
    },
    protocol.RANKS_PATH: {
        "get": {
            "operationId": "listRanks",
            "summary": "One kind and role's registered ranks (without their values) and, with a world "
            "size, the missing ones.",
            "parameters": [
                _query(
                    "kind",
                    "The record kind listed.",
                    {"type": "string", "default": TRANSFER_ENGINE_INFO},
                ),
                _ROLE,
            ],
            "responses": {
                "200": _json("The listing.", "Listing"),
                "400": _BAD_REQUEST,
                "503": _UNAVAILABLE,
            },
        }
    },
    ENCODER_REGISTER_PATH: {
        "post": {
            "operationId": "registerEncoderUrl",
            "summary": "Add an encoder's URL to the list (listed once however often it registers); "
            "wakes the list's waiters.",
            "requestBody": {"required": True, "content": {_JSON: {"schema": _ref("EncoderUrl")}}},
            "responses": {
                "200": _text("Listed."),
                "400": _BAD_REQUEST,
                **_BODY_ERRORS,
                "503": _UNAVAILABLE,
            },
        }
    },
    ENCODER_UNREGISTER_PATH: {
        "delete": {
            "operationId": "unregisterEncoderUrl",
            "summary": "Remove an encoder's URL from the list; OK also when it was not listed.",
            "requestBody": {"required": True, "content": {_JSON: {"schema": _ref("EncoderUrl")}}},
            "responses": {
                "200": _text("Not listed (any more)."),
                "400": _BAD_REQUEST,
                **_BODY_ERRORS,
                "503": _UNAVAILABLE,
            },
        }
    },
    ENCODER_LIST_PATH: {
        "get": {
            "operationId": "listEncoderUrls",
            "summary": "The encoder URLs, in order of first registration, optionally once the list "
            "changed after a version.",
            "parameters": [
                _query(
                    "wait",
                    "Seconds to hold the request until the list changes after `after`; clamped to "
                    "--max-wait. When it runs out, the list as it is.",
                    _SECONDS,
                ),
                _query(
                    "after",
                    "A version of the list (from an earlier reply): wait for a change after it.",
                    {**_QUERY_INTEGER, "default": 0},
                ),
            ],
            "responses": {
                "200": _json("The list and its version.", "EncoderUrls"),
                "400": _BAD_REQUEST,
                "503": _UNAVAILABLE,
            },
        }
    },
    protocol.METRICS_PATH: {
        "get": {
            "operationId": "metrics",
            "summary": "Every metric of the server, all namespaces, in the Prometheus text format.",
            "responses": {
                "200": _text("The metrics.", 'aiobootstrap_gets_total{outcome="hit"} 3.0'),
                "503": _json("The store does not answer; Retry-After says when to ask again."),
            },
        }
    },
    protocol.OPENAPI_PATH: {
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

_SERVER_WIDE = frozenset({protocol.READY_PATH, protocol.METRICS_PATH, protocol.OPENAPI_PATH})
"""Paths served once for the whole server, not under each namespace."""

_NAMESPACE = {
    "name": "namespace",
    "in": "path",
    "required": True,
    "description": "The namespace (one deployment). The unprefixed routes are the namespace default.",
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"},
}

_RANK_SCHEMA = {"type": "integer", "minimum": 0, "maximum": MAX_RANK}
_ROLE_SCHEMA = {"type": "string", "minLength": 1, "default": DEFAULT_ROLE}


def _kind_schemas(kind: RecordKind) -> dict[str, Any]:
    """A kind's register body, get reply and batch reply, from its table entry."""
    item = _ref(kind.title) if kind.item_schema is None else dict(kind.item_schema)
    return {
        f"{kind.title}Registration": {
            "type": "object",
            "required": [kind.field],
            "description": "Give rank (or, from older clients, tp_rank). When rank is present it wins and "
            "tp_rank is not read at all.",
            "properties": {
                "rank": _RANK_SCHEMA,
                "tp_rank": {"description": "Read only when rank is absent; then it must be a rank."},
                "role": _ROLE_SCHEMA,
                kind.field: dict(kind.value_schema),
            },
            "anyOf": [
                {"required": ["rank"]},
                {"required": ["tp_rank"], "properties": {"tp_rank": _RANK_SCHEMA}},
            ],
        },
        kind.title: dict(kind.reply_schema),
        f"{kind.title}Batch": {
            "type": "object",
            "required": [kind.batch_field, "version"],
            "properties": {
                kind.batch_field: {"type": "array", "items": item},
                "version": {"type": "integer", "description": "The namespace's latest version."},
            },
        },
    }


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
                "description": (
                    f"The ranks still missing, in order: all of them, or the first {protocol.MISSING_LIST_MAX} "
                    "when missing_truncated is true."
                ),
            },
            "missing_ranks": {
                "type": "string",
                "description": "A batch's every missing rank as a rank set such as 0-3,8 (a batch 404 only).",
            },
            "missing_truncated": {
                "type": "boolean",
                "description": f"True when more than {protocol.MISSING_LIST_MAX} ranks are missing.",
            },
        },
    },
    "EncoderUrl": {
        "type": "object",
        "required": ["url"],
        "properties": {"url": {"type": "string", "minLength": 1, "example": "http://10.0.0.9:8000"}},
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
    "Listing": {
        "type": "object",
        "required": ["version", "kind", "role", "world_size", "count", "ranks", "missing", "missing_ranks"],
        "properties": {
            "version": {"type": "integer"},
            "kind": {"type": "string", "description": "The record kind listed."},
            "role": {"type": "string", "description": "The role listed."},
            "world_size": {"type": ["integer", "null"]},
            "count": {"type": "integer"},
            "ranks": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "rank": {"type": "integer"},
                        "session_id": {"type": "string", "description": "Transfer-engine info only."},
                        "backend": {"type": "string", "description": "Tagged transfer-engine info only."},
                        "version": {"type": "integer"},
                        "registered_at": {"type": "number", "description": "Unix time of the registration."},
                        "age": {"type": "number", "description": "Seconds since the registration."},
                    },
                },
            },
            "missing": {
                "type": ["array", "null"],
                "items": {"type": "integer"},
                "description": (
                    f"The ranks of [0, world_size) not registered, in order: all of them, or the first "
                    f"{protocol.MISSING_LIST_MAX} when missing_truncated is true; null without a world size."
                ),
            },
            "missing_ranks": {
                "type": ["string", "null"],
                "description": (
                    "Every rank of [0, world_size) not registered, as a rank set such as 0-3,8 "
                    "(empty when none is missing); null without a world size."
                ),
            },
            "missing_truncated": {
                "type": "boolean",
                "description": f"True when more than {protocol.MISSING_LIST_MAX} ranks are missing.",
            },
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


def document(*, token: bool = False) -> dict[str, Any]:
    """The OpenAPI document of every route (the kinds' routes as the kind table has them now).

    ``token``: whether the server requires a bearer token (every route but ``/health`` then
    declares the security scheme).
    """
    described = copy.deepcopy(_PATHS)
    kind_names = [kind.name for kind in _kinds.KINDS]
    described[protocol.RANKS_PATH]["get"]["parameters"][0]["schema"]["enum"] = kind_names
    schemas = dict(_SCHEMAS)
    for kind in _kinds.KINDS:
        described.update(_kind_paths(kind))
        schemas.update(_kind_schemas(kind))
    paths: dict[str, Any] = {}
    for route, item in described.items():
        paths[route] = item
        if route not in _SERVER_WIDE:
            paths[protocol.path(route, "{namespace}")] = _in_namespace(item)
    for route, item in paths.items():
        for operation in item.values():
            if route.endswith(protocol.HEALTH_PATH) or route == protocol.READY_PATH:
                operation["security"] = []
            elif token:
                operation["security"] = [{_SECURITY_SCHEME: []}]
                operation["responses"]["401"] = _UNAUTHORIZED
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "aiobootstrap",
            "version": __version__,
            "description": "A long-poll rendezvous server for the ranks of a distributed inference engine. "
            'Every error reply is JSON {"detail": ...}.',
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                _SECURITY_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The server's --auth-token; /health and /ready never ask for it.",
                }
            },
        },
    }


def openapi(*, token: bool) -> Handler:
    """``GET /openapi.json``: the document for a server that requires a bearer token or not."""

    async def openapi(request: web.Request) -> web.Response:
        return web.Response(body=dumps(document(token=token)), content_type=_JSON)

    return openapi
