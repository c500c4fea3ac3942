"""The OpenAPI description of every route, served at ``GET /openapi.json``.

Written by hand, so it says what the routes mean, and kept true by
``tests/test_openapi.py``, which fails for any route the app serves that is
not described. Each face describes its own routes, in its folder
(``Face.paths`` and ``Face.schemas``); here is the document assembled from
them and the server's own routes, each face path with its
``/ns/{namespace}`` twin, and the security each route declares by its
``Access``. The builders the faces describe with are this package's:
``paths.py`` (replies, parameters, the twins; the server's own paths),
``schemas.py`` (the shared schemas), ``leases.py`` (a register body's lease).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from ..._json import dumps
from ..._version import __version__
from ...wire.routes import JSON_TYPE, path
from ..access import route_access
from ..face import Access, Face
from ..face_registry import installed_faces
from .paths import PATHS, RANKS_FORMAT, in_namespace, json_reply
from .schemas import SCHEMAS, namespaces_schema

__all__ = ["RANKS_FORMAT", "document", "openapi"]

_SECURITY_SCHEME = "bearerAuth"
"""The one security scheme: ``Authorization: Bearer <token>``, when the server has a token."""
_UNAUTHORIZED = json_reply("A token is required and was missing or wrong.")
_FORBIDDEN = json_reply("The token is known, but its scope does not cover this namespace or this write.")
_EXPECTATION_FAILED = json_reply(
    "An Expect header other than 100-continue: the only expectation this server meets (auth.expect_handler)."
)


def document(
    faces: Sequence[Face] | None = None, *, token: bool = False, open_reads: bool = False
) -> dict[str, Any]:
    """The OpenAPI document of the server's routes and those of ``faces`` (the installed ones unless told),
    each face's as it describes them now (the engine-info face's from the kind table as it is).

    ``token``: whether the server requires a bearer token (every route but the probes then
    declares the security scheme, as ``server.access``'s table classifies it). ``open_reads``:
    reads may also be sent without one.
    """
    if faces is None:
        faces = installed_faces()
    access = route_access(faces)
    paths: dict[str, Any] = {}
    schemas = copy.deepcopy(SCHEMAS)
    schemas["Namespaces"] = namespaces_schema(count for face in faces for count in face.counts)
    for face in faces:
        for route, item in face.paths().items():
            paths[route] = {**paths.get(route, {}), **copy.deepcopy(item)}
        schemas.update(copy.deepcopy(dict(face.schemas())))
    # Each face's route is served in every namespace too; the server's own routes once.
    twinned: dict[str, Any] = {}
    for route, item in paths.items():
        twinned[route] = item
        twinned[path(route, "{namespace}")] = in_namespace(item)
    paths = {**twinned, **copy.deepcopy(PATHS)}
    for route, item in paths.items():
        for method, operation in item.items():
            # Every route answers an expectation it cannot meet so, before its handler runs.
            operation["responses"].setdefault("417", _EXPECTATION_FAILED)
            does = access[method.upper(), route.removeprefix(path("", "{namespace}")) or "/"]
            if does is Access.PROBE:
                operation["security"] = []
            elif token:
                bearer: list[dict[str, list[str]]] = [{_SECURITY_SCHEME: []}]
                # With open reads a read may come with no token ({}) or with a valid one.
                opened = open_reads and does is not Access.WRITE
                operation["security"] = [{}, *bearer] if opened else bearer
                operation["responses"]["401"] = _UNAUTHORIZED
                if does is Access.WRITE or (does is Access.READ and not open_reads):
                    operation["responses"]["403"] = _FORBIDDEN
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
                    "description": "A token of the server's --auth-token-file (or AIOBOOTSTRAP_AUTH_TOKEN); "
                    "/health and /ready never ask for it.",
                }
            },
        },
    }


def openapi(faces: Sequence[Face], *, token: bool, open_reads: bool = False) -> Handler:
    """``GET /openapi.json``: the document of ``faces`` for a server that requires a bearer token or not."""

    async def openapi(request: web.Request) -> web.Response:
        body = dumps(document(faces, token=token, open_reads=open_reads))
        return web.Response(body=body, content_type=JSON_TYPE)

    return openapi
