"""The routes served once for the whole server, beside ``/metrics`` (``metrics``) and ``/openapi.json``
(``openapi``): ``/ready`` (the readiness probe) and ``/namespaces``. ``app`` adds them; they are no face's."""

from __future__ import annotations

from aiohttp import web

from ..wire.results import encode_namespaces, namespace_summary
from ..wire.routes import JSON_TYPE
from .appkeys import REGISTRY
from .metrics import shown_namespaces

__all__ = ["list_namespaces", "ready"]


async def ready(request: web.Request) -> web.Response:
    """``GET /ready``: ``OK`` while the store answers, ``503`` (JSON) while it does not."""
    await request.app[REGISTRY].ping()
    return web.Response(text="OK")


async def list_namespaces(request: web.Request) -> web.Response:
    """``GET /namespaces``: every namespace holding records or parked waits that the token may see, and
    the server's count of waits parked or gone so far (``waits``, which a watch's ``&waits=`` follows)."""
    shown = [  # each with the counts its faces keep (Face.counts), by name
        namespace_summary(each.name, each.version, each.parked, each.counts)
        for each in await shown_namespaces(request)
    ]
    moves = request.app[REGISTRY].parking.wait_changes.count
    return web.Response(body=encode_namespaces(shown, moves), content_type=JSON_TYPE)
