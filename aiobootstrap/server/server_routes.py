"""The routes served once for the whole server, beside ``/metrics`` (``metrics``) and ``/openapi.json``
(``openapi``): ``/ready`` (the readiness probe) and ``/namespaces``. ``app`` adds them; they are no face's."""

from __future__ import annotations

from aiohttp import web

from ..wire.listeners import listening_fields
from ..wire.results import encode_namespaces, namespace_summary
from ..wire.routes import JSON_TYPE
from .access import GUARD
from .appkeys import REGISTRY
from .listeners import LISTENING, listener_of
from .metrics import shown_namespaces

__all__ = ["list_namespaces", "ready"]


async def ready(request: web.Request) -> web.Response:
    """``GET /ready``: ``OK`` while the store answers, ``503`` (JSON) while it does not."""
    await request.app[REGISTRY].ping()
    return web.Response(text="OK")


async def list_namespaces(request: web.Request) -> web.Response:
    """``GET /namespaces``: every namespace holding records or parked waits that the token may see, and
    the server's count of waits parked or gone so far (``waits``, which a watch's ``&waits=`` follows).

    With listeners of one namespace each (``--listen``), the ones the token may see too; on a listener's
    port, its namespace alone, and which it is (``wire.listeners``)."""
    here = listener_of(request)
    shown = [  # each with the counts its faces keep (Face.counts), by name
        namespace_summary(each.name, each.version, each.parked, each.counts)
        for each in await shown_namespaces(request)
        if here is None or each.name == here
    ]
    moves = request.app[REGISTRY].parking.wait_changes.count
    listening = request.app.get(LISTENING)
    others = None
    if listening is not None:
        guard = request.app.get(GUARD)
        visible = None if guard is None else guard.listed(request)
        listeners = [
            (name, url)
            for name, url in listening.listeners
            if (visible is None or name in visible) and (here is None or name == here)
        ]
        others = listening_fields(listeners, here)
    return web.Response(body=encode_namespaces(shown, moves, others), content_type=JSON_TYPE)
