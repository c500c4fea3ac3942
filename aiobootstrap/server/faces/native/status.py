"""What a namespace says of itself: ``/health`` (the probe).

The routes served once for the whole server (``/ready``, ``/namespaces``) are the host's
(``server/server_routes.py``); a face's listing of its records is the face's (``/ranks``: the
engine-info face's)."""

from __future__ import annotations

from aiohttp import web

from ...._names import HEALTH_HEADER
from ...._version import __version__
from ..common import namespace_of

__all__ = ["health"]


async def health(request: web.Request) -> web.Response:
    """``GET /health``: ``OK``, with the header that names an aiobootstrap server."""
    namespace_of(request)  # /ns/<not a namespace>/health is a 400, as on every other route
    # The header tells a port-clash probe (see portinfo) that an aiobootstrap server holds the port.
    return web.Response(text="OK", headers={HEALTH_HEADER: __version__})
