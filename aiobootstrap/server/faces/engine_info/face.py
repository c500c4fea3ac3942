"""The engine-info face: SGLang's per-rank records (transfer-engine info, parallelism config), one
set of routes per entry of the kind table (``faces/kinds.py``), read when the app is made."""

from __future__ import annotations

from aiohttp import web

from ...face import Access, ExpectHandler, Face, RouteAccess
from .. import kinds as _kinds
from . import openapi
from .routes import kind_routes

__all__ = ["ENGINE_INFO"]


def _routes(expect: ExpectHandler | None) -> list[web.RouteDef]:
    return [route for kind in _kinds.KINDS for route in kind_routes(kind, expect)]


def _access() -> RouteAccess:
    table = {}
    for kind in _kinds.KINDS:  # a kind added to the table is classified too
        table["PUT", kind.register_path] = Access.WRITE
        table["DELETE", kind.register_path] = Access.WRITE
        table["GET", kind.get_path] = Access.READ
        table["GET", kind.batch_path] = Access.READ
    return table


ENGINE_INFO = Face("engine_info", _routes, _access, openapi.paths, openapi.schemas)
"""Register, unregister, get and batch get of every record kind."""
