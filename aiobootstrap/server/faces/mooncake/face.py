"""The Mooncake face: the metadata server Mooncake's transfer engines rendezvous through (SPEC section 14),
``GET``/``PUT``/``DELETE /metadata?key=K`` on the registry."""

from __future__ import annotations

from aiohttp import web

from ....wire.metadata import METADATA_PATH, MOONCAKE_LISTING_PATH
from ...face import Access, ExpectHandler, Face, RouteAccess
from . import openapi
from .probes import mooncake_probes_context
from .routes import delete_metadata, get_metadata, list_mooncake, put_metadata

__all__ = ["MOONCAKE"]


def _routes(expect: ExpectHandler | None) -> list[web.RouteDef]:
    return [
        web.get(METADATA_PATH, get_metadata, expect_handler=expect),
        web.put(METADATA_PATH, put_metadata, expect_handler=expect),
        web.delete(METADATA_PATH, delete_metadata, expect_handler=expect),
        web.get(MOONCAKE_LISTING_PATH, list_mooncake, expect_handler=expect),
    ]


def _access() -> RouteAccess:
    return {
        ("GET", METADATA_PATH): Access.READ,
        ("PUT", METADATA_PATH): Access.WRITE,
        ("DELETE", METADATA_PATH): Access.WRITE,
        ("GET", MOONCAKE_LISTING_PATH): Access.READ,
    }


MOONCAKE = Face(
    "mooncake",
    _routes,
    _access,
    paths=lambda: openapi.PATHS,
    schemas=lambda: openapi.SCHEMAS,
    contexts=(mooncake_probes_context,),
)
"""Mooncake's metadata keys: a segment's descriptor, an engine's RPC address."""
