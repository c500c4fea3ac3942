"""The prefill face: SGLang's prefill bootstrap server for PD disaggregation (SPEC section 13), its
``/route``, ``/register_dp_rank`` and ``/query_dp_ranks`` on the registry."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from .... import wire
from ...appkeys import CONFIG
from ...face import Access, Face, Route
from . import openapi
from .rooms import ROOM_LEASES, RoomLeases, query_dp_ranks, register_dp_rank
from .routes import delete_route, get_route, list_prefill, put_route

__all__ = ["PREFILL"]


def _routes() -> list[Route]:
    # Registering a rank or a room is a write; decode's questions are reads (so --auth-reads open lets
    # decode in without a token, as SGLang's PR #39416 proposes, while only prefill ranks may write).
    read, write = Access.READ, Access.WRITE
    return [
        Route("PUT", wire.PREFILL_ROUTE_PATH, put_route, write),
        Route("GET", wire.PREFILL_ROUTE_PATH, get_route, read),
        Route("DELETE", wire.PREFILL_ROUTE_PATH, delete_route, write),
        Route("POST", wire.PREFILL_REGISTER_ROOM_PATH, register_dp_rank, write),
        Route("POST", wire.PREFILL_QUERY_ROOMS_PATH, query_dp_ranks, read),
        Route("GET", wire.PREFILL_LISTING_PATH, list_prefill, read),
    ]


async def _room_leases(app: web.Application) -> AsyncIterator[None]:
    """Each namespace's lease of the current epoch of rooms, for as long as the app runs."""
    app[ROOM_LEASES] = RoomLeases(app[CONFIG].dp_room_ttl)
    yield


PREFILL = Face.of_routes(
    "prefill",
    _routes,
    paths=lambda: openapi.PATHS,
    schemas=lambda: openapi.SCHEMAS,
    contexts=(_room_leases,),
)
"""The prefill ranks, decode's questions and the bootstrap rooms."""
