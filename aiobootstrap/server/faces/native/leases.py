"""Leases (SPEC section 9): grant, keep alive, read and revoke, in every namespace.

The leases are the store's state (``store.leases``); these handlers read the
request, call the store through the registry's, and write the reply. A
register naming a lease is the register handlers' (``engine_info``,
``encoders``), through ``wire.leases.parse_lease_field``.
"""

from __future__ import annotations

from aiohttp import web

from ....store import LeaseState
from ....wire import leases as wire_leases
from ....wire.bodies import parse_body
from ...appkeys import CONFIG, REGISTRY
from ...body import read_body
from ...face import Access, Route
from ...fastpath.replies import JsonReply, Reply, TextReply
from ..common import namespace_of

__all__ = ["lease_routes"]


def lease_routes() -> list[Route]:
    """The lease routes (each also served under ``/ns/{namespace}``). A lease is a namespace's: granting,
    keeping and revoking one change its records' lives."""
    return [
        Route("POST", wire_leases.LEASES_PATH, grant_lease, Access.WRITE),
        Route("POST", wire_leases.LEASE_KEEPALIVE_ROUTE, keepalive_lease, Access.WRITE),
        Route("GET", wire_leases.LEASE_ROUTE, read_lease, Access.READ),
        Route("DELETE", wire_leases.LEASE_ROUTE, revoke_lease, Access.WRITE),
    ]


def _reply(state: LeaseState, *, whole: bool = False) -> JsonReply:
    if whole:
        records = [
            wire_leases.lease_record(key.kind, key.role, key.rank, member, key.name)
            for key, member in state.records
        ]
        body = wire_leases.encode_lease(state.id, state.ttl, state.remaining, records)
    else:
        body = wire_leases.encode_lease(state.id, state.ttl)
    return JsonReply(body)


async def grant_lease(request: web.Request) -> Reply:
    """``POST /leases {"ttl": S}``: a new lease of S seconds."""
    payload = parse_body(await read_body(request, request.app[CONFIG]))
    ttl = wire_leases.parse_ttl_body(payload)
    state = await request.app[REGISTRY].grant_lease(namespace_of(request), ttl)
    return _reply(state)


async def keepalive_lease(request: web.Request) -> Reply:
    """``POST /leases/{ID}/keepalive``: the full TTL again.

    The busiest route of a leased fleet (every holder, a third of each TTL): the
    responder writes its ``200`` as pre-built bytes where the app allows them.
    No body is read.
    """
    state = await request.app[REGISTRY].keepalive_lease(namespace_of(request), request.match_info["lease"])
    return _reply(state)


async def read_lease(request: web.Request) -> Reply:
    """``GET /leases/{ID}``: its TTL, the seconds left and the records on it."""
    state = await request.app[REGISTRY].read_lease(namespace_of(request), request.match_info["lease"])
    return _reply(state, whole=True)


async def revoke_lease(request: web.Request) -> Reply:
    """``DELETE /leases/{ID}``: the lease and every record on it, gone now."""
    await request.app[REGISTRY].revoke_lease(namespace_of(request), request.match_info["lease"])
    return TextReply("OK")
