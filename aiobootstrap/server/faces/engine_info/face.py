"""The engine-info face: SGLang's per-rank records (transfer-engine info, parallelism config), one
set of routes per entry of the kind table (``kinds.py``), read when the app is made, and their
listing (``/ranks``)."""

from __future__ import annotations

from aiohttp import web

from ...._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from ....core.registry import Registry
from ....wire.routes import RANKS_PATH
from ...config import ServerConfig
from ...face import Access, ExpectHandler, Face, Route, RouteAccess
from ...kind_spec import KindFigures, NamespaceCount
from . import kinds as _kinds
from . import openapi
from .routes import kind_routes, list_ranks

__all__ = ["FACE", "engine_info_face"]


def _routes(expect: ExpectHandler | None) -> list[web.RouteDef]:
    every = [route for kind in _kinds.KINDS for route in kind_routes(kind, expect)]
    return [*every, Route("GET", RANKS_PATH, list_ranks, Access.READ).definition(expect)]


def _access() -> RouteAccess:
    table = {}
    for kind in _kinds.KINDS:  # a kind added to the table is classified too
        table["PUT", kind.register_path] = Access.WRITE
        table["DELETE", kind.register_path] = Access.WRITE
        table["GET", kind.get_path] = Access.READ
        table["GET", kind.batch_path] = Access.READ
    table["GET", RANKS_PATH] = Access.READ
    return table


async def _figures(registry: Registry, namespace: str, config: ServerConfig) -> list[KindFigures]:
    """Role target of every per-rank kind, out of the server's world size (``--world-size``)."""
    return [
        KindFigures(
            kind.name,
            DEFAULT_ROLE,
            await registry.count(namespace, kind.name, DEFAULT_ROLE),
            config.world_size,
            0.0,
        )
        for kind in _kinds.KINDS
    ]


async def _ranks(registry: Registry, namespace: str) -> int:
    return await registry.count(namespace, TRANSFER_ENGINE_INFO, DEFAULT_ROLE)


RANKS = NamespaceCount(
    "ranks",
    _ranks,
    description="Ranks holding transfer-engine info of role target.",
    metric="aiobootstrap_registered_ranks",
    help="Ranks registered right now, by namespace.",
)
"""The ranks of a namespace: ``/namespaces``' ``ranks``, and ``aiobootstrap_registered_ranks``."""


def engine_info_face() -> Face:
    """The face as the kind table (``kinds.KINDS``) is now: its kinds are declared from it."""
    return Face(
        "engine_info",
        _routes,
        _access,
        openapi.paths,
        openapi.schemas,
        kinds=tuple(_kinds.kind_spec(kind) for kind in _kinds.KINDS),
        figures=_figures,
        counts=(RANKS,),
        order=10,
    )


FACE = engine_info_face()
"""Register, unregister, get and batch get of every record kind."""
