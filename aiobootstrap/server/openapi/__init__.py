"""The OpenAPI description of every route, served at ``GET /openapi.json``.

Written by hand, so it says what the routes mean, and kept true by
``tests/test_openapi.py``, which fails for any route the app serves that is
not described here. Three rooms: the paths (``paths.py``, where a new route
is described), the component schemas they refer to (``schemas.py``), and
here the document built of them, with the security each route declares. A
record kind's routes and schemas are described from its entry in the kind
table (``server.kinds.KINDS``).
"""

from __future__ import annotations

import copy
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from ... import wire as protocol
from ..._json import dumps
from ..._version import __version__
from .. import kinds as _kinds
from .leases import describe_leases
from .paths import PATHS, RANKS_FORMAT, SERVER_WIDE, in_namespace, json_reply, kind_paths
from .schemas import SCHEMAS, kind_schemas

__all__ = ["RANKS_FORMAT", "document", "openapi"]

_SECURITY_SCHEME = "bearerAuth"
"""The one security scheme: ``Authorization: Bearer <token>``, when the server has a token."""
_UNAUTHORIZED = json_reply("A token is required and was missing or wrong.")


def document(*, token: bool = False) -> dict[str, Any]:
    """The OpenAPI document of every route (the kinds' routes as the kind table has them now).

    ``token``: whether the server requires a bearer token (every route but ``/health`` then
    declares the security scheme).
    """
    described = copy.deepcopy(PATHS)
    kind_names = [kind.name for kind in _kinds.KINDS]
    described[protocol.RANKS_PATH]["get"]["parameters"][0]["schema"]["enum"] = kind_names
    schemas = dict(SCHEMAS)
    for kind in _kinds.KINDS:
        described.update(kind_paths(kind))
        schemas.update(kind_schemas(kind))
    registers = [kind.register_path for kind in _kinds.KINDS] + [protocol.ENCODER_REGISTER_PATH]
    describe_leases(described, schemas, registers)
    paths: dict[str, Any] = {}
    for route, item in described.items():
        paths[route] = item
        if route not in SERVER_WIDE:
            paths[protocol.path(route, "{namespace}")] = in_namespace(item)
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
        return web.Response(body=dumps(document(token=token)), content_type=protocol.JSON_TYPE)

    return openapi
