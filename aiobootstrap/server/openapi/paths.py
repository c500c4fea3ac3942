"""The OpenAPI document's paths: what each route takes and answers.

To describe a new route, add its path to :data:`PATHS`; its
``/ns/{namespace}`` twin is described from it (:func:`in_namespace`) unless
the path is in :data:`SERVER_WIDE`. A record kind's four routes are described
from its entry in the kind table (:func:`kind_paths`).
"""

from __future__ import annotations

import copy
from typing import Any

from ... import wire
from ..._names import NAME_PATTERN, TRANSFER_ENGINE_INFO
from ..._ranks import MAX_RANK
from ...wire import ENCODER_LIST_PATH, ENCODER_REGISTER_PATH, ENCODER_UNREGISTER_PATH
from ..faces.kinds import RecordKind
from .schemas import RANK, ROLE, ref

__all__ = ["PATHS", "RANKS_FORMAT", "SERVER_WIDE", "in_namespace", "json_reply", "kind_paths"]

_JSON = wire.JSON_TYPE


def json_reply(description: str, schema: str = "Error") -> dict[str, Any]:
    """A JSON reply of the component schema ``schema`` (an error's ``{"detail": ...}`` unless told)."""
    return {"description": description, "content": {_JSON: {"schema": ref(schema)}}}


def _text(description: str, example: str = "OK") -> dict[str, Any]:
    return {
        "description": description,
        "content": {"text/plain": {"schema": {"type": "string"}, "example": example}},
    }


def _query(name: str, description: str, schema: dict[str, Any], *, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "description": description, "schema": schema}


_BAD_REQUEST = json_reply("A malformed parameter or body; the detail names it.")
_UNAVAILABLE = json_reply(
    "The server is shutting down, holds as many waits as it allows (with Retry-After), "
    "hosts as many namespaces as it allows, or its store does not answer (with Retry-After)."
)
_BODY_ERRORS = {
    "408": json_reply("The body did not arrive within the server's --body-timeout."),
    "413": json_reply("The body is larger than the server's --max-body-size."),
    "415": json_reply("The body has a Content-Encoding; send it uncompressed."),
}
"""What reading any request body can answer."""

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
    {**RANK, "default": 0},
)

_BOOT = _query(
    "boot",
    "The boot id (X-Aiobootstrap-Boot) that `after` came from: when the registry is another "
    "incarnation, `after` counts as 0 (its records are all news).",
    {"type": "string"},
)

_ROLE = _query(
    "role",
    "The role whose records are meant (a speculative draft model's are apart from its target's).",
    ROLE,
)
_FORM = _query(
    "form",
    "object: serve each registration whole, as the object it was; list (the default): the kind's "
    "usual shape (for classic transfer-engine info, [session_id, weights_info_dict]).",
    {"type": "string", "enum": list(wire.FORMS), "default": "list"},
)
_RANK = _query("rank", "The rank.", RANK, required=True)

RANKS_FORMAT = "aiobootstrap-ranks"
"""The ``format`` of a batch's ``ranks``: a pattern says its grammar, not that a range's end is not
below its start, nor how many ranks a batch may name."""
_DIGITS = f"[0-9]{{1,{len(str(MAX_RANK))}}}"
_RANK_PART = rf"\s*{_DIGITS}(-{_DIGITS})?\s*"
"""One rank or range; the server strips white space around each."""
_RANKS = _query(
    "ranks",
    "The ranks: comma-separated ranks and inclusive ranges, such as 0-7,12; a range's end is not "
    f"below its start, and a batch names at most {wire.MAX_BATCH_RANKS} distinct ranks.",
    {
        "type": "string",
        "format": RANKS_FORMAT,
        "pattern": f"^{_RANK_PART}(,{_RANK_PART})*$",
        "example": "0-7,12",
    },
    required=True,
)


def kind_paths(kind: RecordKind) -> dict[str, dict[str, Any]]:
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
                    "content": {_JSON: {"schema": ref(f"{title}Registration")}},
                },
                "responses": {
                    "200": _text("Registered."),
                    "400": _BAD_REQUEST,
                    **_BODY_ERRORS,
                    "409": json_reply(
                        "A new rank past the server's --max-ranks (no world size set), or a new role past --max-roles."
                    ),
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
                    "404": json_reply(f"The rank was not registered: {absent}, `missing: [N]`.", "Missing"),
                    "503": _UNAVAILABLE,
                },
            },
        },
        kind.get_path: {
            "get": {
                "operationId": f"get{title}",
                "summary": f"A rank's {noun}, optionally waiting for it to register. The "
                "X-Aiobootstrap-Version header carries the record's version.",
                "parameters": [_RANK, _ROLE, _WAIT, _AFTER, _BOOT, _FORM],
                "responses": {
                    "200": json_reply(f"The rank's {noun}.", title),
                    "400": _BAD_REQUEST,
                    "404": json_reply(
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
                    _BOOT,
                    _FORM,
                ],
                "responses": {
                    "200": json_reply(f"Every asked rank's {noun}.", f"{title}Batch"),
                    "400": _BAD_REQUEST,
                    "404": json_reply(
                        "Some ranks are not registered (when the wait ran out); listed in missing.", "Missing"
                    ),
                    "503": _UNAVAILABLE,
                },
            }
        },
    }


PATHS: dict[str, dict[str, Any]] = {
    wire.HEALTH_PATH: {
        "get": {
            "operationId": "health",
            "summary": "Whether the server is up.",
            "responses": {"200": _text("The server is up.")},
        }
    },
    wire.READY_PATH: {
        "get": {
            "operationId": "ready",
            "summary": "Whether the server's store answers (readiness, for a load balancer).",
            "responses": {
                "200": _text("The store answers."),
                "503": json_reply("The store does not answer; Retry-After says when to ask again."),
            },
        }
    },
    wire.PAGE_PATH: {
        "get": {
            "operationId": "page",
            "summary": "The bring-up page for a browser: every rank of each kind and role, live from /watch "
            "(one HTML file, its script and style inline; it reads the API with the token it asks for).",
            "responses": {
                "200": {"description": "The page.", "content": {"text/html": {"schema": {"type": "string"}}}},
            },
        }
    },
    wire.RANKS_PATH: {
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
                "200": json_reply("The listing.", "Listing"),
                "400": _BAD_REQUEST,
                "503": _UNAVAILABLE,
            },
        }
    },
    ENCODER_REGISTER_PATH: {
        "post": {
            "operationId": "registerEncoderUrl",
            "summary": "Add an encoder's URL to the list (listed once however often it registers, "
            "an evicted one at once); wakes the list's waiters.",
            "requestBody": {"required": True, "content": {_JSON: {"schema": ref("EncoderUrl")}}},
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
            "summary": "Remove an encoder's URL from the list and end its health probes; OK also when "
            "it was not listed.",
            "requestBody": {"required": True, "content": {_JSON: {"schema": ref("EncoderUrl")}}},
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
                    {**RANK, "default": 0},
                ),
                _BOOT,
            ],
            "responses": {
                "200": json_reply("The list and its version.", "EncoderUrls"),
                "400": _BAD_REQUEST,
                "503": _UNAVAILABLE,
            },
        }
    },
    wire.ENCODER_HEALTH_PATH: {
        "get": {
            "operationId": "encoderUrlHealth",
            "summary": "Each listed and evicted encoder URL with what this replica's health probes found "
            "(healthy, failing with its failures, evicted and for how long).",
            "responses": {
                "200": json_reply("The URLs and their health.", "EncoderUrlHealth"),
                "400": _BAD_REQUEST,
                "503": _UNAVAILABLE,
            },
        }
    },
    wire.METRICS_PATH: {
        "get": {
            "operationId": "metrics",
            "summary": "Every metric of the server, all namespaces, in the Prometheus text format.",
            "responses": {
                "200": _text("The metrics.", 'aiobootstrap_gets_total{outcome="hit"} 3.0'),
                "503": json_reply("The store does not answer; Retry-After says when to ask again."),
            },
        }
    },
    wire.NAMESPACES_PATH: {
        "get": {
            "operationId": "listNamespaces",
            "summary": "Every namespace holding records or parked waits, in order of name; with tokens, "
            "the ones the token covers.",
            "responses": {
                "200": json_reply("The namespaces.", "Namespaces"),
                "503": _UNAVAILABLE,
            },
        }
    },
    wire.OPENAPI_PATH: {
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

SERVER_WIDE = wire.SERVER_WIDE_PATHS
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
        operation["responses"].setdefault("400", _BAD_REQUEST)
        operation["responses"].setdefault("503", _UNAVAILABLE)
    return item
