"""``GET /ranks``: one per-rank kind and role's records, as the bring-up page and ``status`` read them."""

from __future__ import annotations

import time

from aiohttp import web

from ....wire.bodies import parse_role_param
from ....wire.routes import JSON_TYPE
from ...appkeys import CONFIG, REGISTRY
from .. import records
from ..common import namespace_of, param
from .kinds import kind_named

__all__ = ["list_ranks"]


async def list_ranks(request: web.Request) -> web.Response:
    """``GET /ranks[?kind=K][&role=R]``: one kind and role's records (transfer-engine info, target)."""
    kind = kind_named(param(request, "kind"))
    role = parse_role_param(param(request, "role"))
    namespace = namespace_of(request)
    registry = request.app[REGISTRY]
    found = await registry.records(namespace, kind.name, role)
    body = records.encode_listing(
        found,
        await registry.version(namespace),
        request.app[CONFIG].world_size,
        registry.parked_in(namespace),
        time.time(),
        kind=kind.name,
        role=role,
        summary=kind.summary,
        leases=await registry.leases_of([(record.key, None) for record in found]),
        waiters_by_rank=registry.parking.by_rank(namespace, kind.name, role),
    )
    return web.Response(body=body, content_type=JSON_TYPE)
