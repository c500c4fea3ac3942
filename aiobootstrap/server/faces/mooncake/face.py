"""The Mooncake face: the metadata server Mooncake's transfer engines rendezvous through (SPEC section 14),
``GET``/``PUT``/``DELETE /metadata?key=K`` on the registry."""

from __future__ import annotations

from ....wire.metadata import METADATA_PATH, MOONCAKE_LISTING_PATH
from ...face import Access, Face, Route
from . import openapi
from .probes import mooncake_probes_context
from .routes import delete_metadata, get_metadata, list_mooncake, put_metadata

__all__ = ["MOONCAKE"]


def _routes() -> list[Route]:
    return [
        Route("GET", METADATA_PATH, get_metadata, Access.READ),
        Route("PUT", METADATA_PATH, put_metadata, Access.WRITE),
        Route("DELETE", METADATA_PATH, delete_metadata, Access.WRITE),
        Route("GET", MOONCAKE_LISTING_PATH, list_mooncake, Access.READ),
    ]


MOONCAKE = Face.of_routes(
    "mooncake",
    _routes,
    paths=lambda: openapi.PATHS,
    schemas=lambda: openapi.SCHEMAS,
    contexts=(mooncake_probes_context,),
)
"""Mooncake's metadata keys: a segment's descriptor, an engine's RPC address."""
