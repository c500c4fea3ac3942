"""The native face: aiobootstrap's own routes in every namespace (the health probe, ``/ranks``,
``/watch``, the leases, the bring-up page).

The routes served once for the whole server (``/ready``, ``/metrics``,
``/namespaces``, ``/openapi.json``) are the server's own, not a face's
(``app.py``, ``access.py``).
"""

from __future__ import annotations

from aiohttp import web

from .... import wire
from ...face import Access, ExpectHandler, Face, RouteAccess
from . import openapi
from .leases import lease_routes
from .page import page
from .status import health, list_ranks
from .watch import watch

__all__ = ["NATIVE"]


def _routes(expect: ExpectHandler | None) -> list[web.RouteDef]:
    return [
        web.get(wire.HEALTH_PATH, health, expect_handler=expect),
        web.get(wire.RANKS_PATH, list_ranks, expect_handler=expect),
        web.get(wire.WATCH_PATH, watch, expect_handler=expect),
        *lease_routes(expect),
        web.get(wire.PAGE_PATH, page, expect_handler=expect),  # /ns/{namespace}/ in a namespace
    ]


def _access() -> RouteAccess:
    read, write = Access.READ, Access.WRITE
    return {
        ("GET", wire.HEALTH_PATH): Access.PROBE,
        ("GET", wire.RANKS_PATH): read,
        ("GET", wire.WATCH_PATH): read,
        # A lease is a namespace's: granting, keeping and revoking one change its records' lives.
        ("POST", wire.LEASES_PATH): write,
        ("POST", wire.LEASE_KEEPALIVE_ROUTE): write,
        ("GET", wire.LEASE_ROUTE): read,
        ("DELETE", wire.LEASE_ROUTE): write,
        ("GET", wire.PAGE_PATH): read,  # the page holds no records, but reads them with the token
    }


NATIVE = Face("native", _routes, _access, openapi.paths, openapi.schemas)
"""The probe, the listing, the watch, the leases and the page."""
