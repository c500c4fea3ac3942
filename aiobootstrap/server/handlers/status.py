"""What a server says of itself: ``/health`` and ``/ready`` (the probes), and the ``/ranks`` listing."""

from __future__ import annotations

import time

from aiohttp import web

from ... import wire as protocol
from ..._names import HEALTH_HEADER
from ..._version import __version__
from .. import records
from ..appkeys import CONFIG, REGISTRY
from ..kinds import kind_named
from .common import namespace_of, param

__all__ = ["PUBLIC", "health", "list_ranks", "ready"]


async def health(request: web.Request) -> web.Response:
    """``GET /health``: ``OK``, with the header that names an aiobootstrap server."""
    namespace_of(request)  # /ns/<not a namespace>/health is a 400, as on every other route
    # The header tells a port-clash probe (see portinfo) that an aiobootstrap server holds the port.
    return web.Response(text="OK", headers={HEALTH_HEADER: __version__})


async def ready(request: web.Request) -> web.Response:
    """``GET /ready``: ``OK`` while the store answers, ``503`` (JSON) while it does not."""
    await request.app[REGISTRY].store.ping()
    return web.Response(text="OK")


PUBLIC = frozenset({health, ready})
"""Handlers that answer without the bearer token: the probes, which say nothing of the records."""


async def list_ranks(request: web.Request) -> web.Response:
    """``GET /ranks[?kind=K][&role=R]``: one kind and role's records (transfer-engine info, target)."""
    kind = kind_named(param(request, "kind"))
    role = protocol.parse_role_param(param(request, "role"))
    namespace = namespace_of(request)
    registry = request.app[REGISTRY]
    store = registry.store
    found = await store.records(namespace, kind.name, role)
    body = records.encode_listing(
        found,
        await store.version(namespace),
        request.app[CONFIG].world_size,
        registry.parked_in(namespace),
        time.time(),
        kind=kind.name,
        role=role,
        summary=kind.summary,
        leases=store.leases_of([(record.key, None) for record in found]),
    )
    return web.Response(body=body, content_type=protocol.JSON_TYPE)
