"""The native face: aiobootstrap's own routes in every namespace (the health probe, ``/watch``, the
leases, the bring-up page).

The routes served once for the whole server (``/ready``, ``/metrics``,
``/namespaces``, ``/openapi.json``) are the server's own, not a face's
(``app.py``, ``access.py``).
"""

from __future__ import annotations

from aiohttp import web

from ...._names import HEALTH_HEADER
from ...._version import __version__
from ....wire.routes import HEALTH_PATH, PAGE_PATH
from ....wire.watch import WATCH_PATH
from ...bringup_page import page
from ...face import Access, Face, Route
from ..common import namespace_of
from . import openapi
from .leases import lease_routes
from .watch import watch

__all__ = ["FACE", "health"]


async def health(request: web.Request) -> web.Response:
    """``GET /health``: ``OK``, with the header that names an aiobootstrap server."""
    namespace_of(request)  # /ns/<not a namespace>/health is a 400, as on every other route
    # The header tells a port-clash probe (see portinfo) that an aiobootstrap server holds the port.
    return web.Response(text="OK", headers={HEALTH_HEADER: __version__})


def _routes() -> list[Route]:
    read = Access.READ
    return [
        Route("GET", HEALTH_PATH, health, Access.PROBE),
        Route("GET", WATCH_PATH, watch, read),
        *lease_routes(),
        # /ns/{namespace}/ in a namespace; the page holds no records, but reads them with the token.
        Route("GET", PAGE_PATH, page, read),
    ]


FACE = Face.of_routes(
    "native", _routes, paths=openapi.paths, schemas=openapi.schemas, order=1000, always=True
)
"""The probe, the watch, the leases and the page: served whatever ``--faces`` names, as every record has them
(``--faces mooncake`` answers ``/health`` as Mooncake's master's server does)."""
