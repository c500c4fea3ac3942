"""What a namespace says of itself: ``/health`` (the probe) and the ``/ranks`` listing.

The routes served once for the whole server (``/ready``, ``/namespaces``) are the host's
(``server/server_routes.py``)."""

from __future__ import annotations

import time

from aiohttp import web

from .... import wire
from ...._names import HEALTH_HEADER
from ...._version import __version__
from ...appkeys import CONFIG, REGISTRY
from .. import records
from ..common import namespace_of, param
from ..kinds import kind_named

__all__ = ["health", "list_ranks"]


async def health(request: web.Request) -> web.Response:
    """``GET /health``: ``OK``, with the header that names an aiobootstrap server."""
    namespace_of(request)  # /ns/<not a namespace>/health is a 400, as on every other route
    # The header tells a port-clash probe (see portinfo) that an aiobootstrap server holds the port.
    return web.Response(text="OK", headers={HEALTH_HEADER: __version__})


async def list_ranks(request: web.Request) -> web.Response:
    """``GET /ranks[?kind=K][&role=R]``: one kind and role's records (transfer-engine info, target)."""
    kind = kind_named(param(request, "kind"))
    role = wire.parse_role_param(param(request, "role"))
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
    return web.Response(body=body, content_type=wire.JSON_TYPE)
