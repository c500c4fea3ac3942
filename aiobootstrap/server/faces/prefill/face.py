"""The prefill face: SGLang's prefill bootstrap server for PD disaggregation (SPEC section 13), its
``/route``, ``/register_dp_rank`` and ``/query_dp_ranks`` on the registry."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from ...._json import dumps
from ...._names import DEFAULT_ROLE
from ....core.registry import Registry
from ....store import Key, Record
from ....wire.prefill import (
    PREFILL_RANK,
    PREFILL_ROOM,
    PREFILL_TOPOLOGY,
    TOPOLOGY_NAME,
    Topology,
    encode_address,
)
from ....wire.routes import (
    PREFILL_LISTING_PATH,
    PREFILL_QUERY_ROOMS_PATH,
    PREFILL_REGISTER_ROOM_PATH,
    PREFILL_ROUTE_PATH,
)
from ...appkeys import CONFIG
from ...config import ServerConfig
from ...face import Access, Face, Route
from ...kind_spec import KindFigures, KindSpec
from . import openapi
from .rooms import ROOM_LEASES, RoomLeases, query_dp_ranks, register_dp_rank, room_cap
from .routes import delete_route, get_route, list_prefill, put_route
from .settings import PrefillSettings

__all__ = ["FACE"]


def _routes() -> list[Route]:
    # Registering a rank or a room is a write; decode's questions are reads (so --auth-reads open lets
    # decode in without a token, as SGLang's PR #39416 proposes, while only prefill ranks may write).
    read, write = Access.READ, Access.WRITE
    return [
        Route("PUT", PREFILL_ROUTE_PATH, put_route, write),
        Route("GET", PREFILL_ROUTE_PATH, get_route, read),
        Route("DELETE", PREFILL_ROUTE_PATH, delete_route, write),
        Route("POST", PREFILL_REGISTER_ROOM_PATH, register_dp_rank, write),
        Route("POST", PREFILL_QUERY_ROOMS_PATH, query_dp_ranks, read),
        Route("GET", PREFILL_LISTING_PATH, list_prefill, read),
    ]


async def _room_leases(app: web.Application) -> AsyncIterator[None]:
    """Each namespace's lease of the current epoch of rooms, for as long as the app runs."""
    app[ROOM_LEASES] = RoomLeases(app[CONFIG].settings_of(PrefillSettings).dp_room_ttl)
    yield


def _encode_rank(record: Record) -> bytes:
    return encode_address(record.value)  # a prefill rank's GET /route: its address, as the engines write it


def _encode_value(record: Record) -> bytes:
    return dumps(record.value)


KINDS = (
    KindSpec(PREFILL_RANK, _encode_rank),
    KindSpec(PREFILL_TOPOLOGY, _encode_value),
    KindSpec(PREFILL_ROOM, _encode_value, cap=room_cap),
)
"""A prefill rank's address (by its name), a deployment's topology (one, named), a bootstrap room."""


async def _figures(registry: Registry, namespace: str, config: ServerConfig) -> list[KindFigures]:
    """A deployment's ranks, its topology's product of sizes the world size (so ``aiobootstrap_missing_ranks``
    alerts on it too), when there is one."""
    topology = await registry.get(Key.named(namespace, PREFILL_TOPOLOGY, DEFAULT_ROLE, TOPOLOGY_NAME))
    if topology is None:
        return []
    expected = Topology.from_value(topology.value).expected
    ranks = await registry.count(namespace, PREFILL_RANK, DEFAULT_ROLE)
    return [KindFigures(PREFILL_RANK, DEFAULT_ROLE, ranks, expected, 0.0)]


FACE = Face.of_routes(
    "prefill",
    _routes,
    paths=lambda: openapi.PATHS,
    schemas=lambda: openapi.SCHEMAS,
    contexts=(_room_leases,),
    kinds=KINDS,
    figures=_figures,
    settings=PrefillSettings,
    order=30,
)
"""The prefill ranks, decode's questions and the bootstrap rooms."""
