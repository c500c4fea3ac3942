"""The Mooncake face: the metadata server Mooncake's transfer engines rendezvous through (SPEC section 14),
``GET``/``PUT``/``DELETE /metadata?key=K`` on the registry."""

from __future__ import annotations

from ...._names import DEFAULT_ROLE
from ....core.registry import Registry
from ....store import Record
from ....wire.metadata import METADATA, METADATA_PATH, MOONCAKE_LISTING_PATH, decode_value
from ...config import ServerConfig
from ...face import Access, Face, Route
from ...kind_spec import KindFigures, KindSpec
from . import openapi
from .probes import mooncake_probes_context
from .routes import delete_metadata, get_metadata, list_mooncake, put_metadata
from .settings import MooncakeSettings

__all__ = ["FACE"]


def _routes() -> list[Route]:
    return [
        Route("GET", METADATA_PATH, get_metadata, Access.READ),
        Route("PUT", METADATA_PATH, put_metadata, Access.WRITE),
        Route("DELETE", METADATA_PATH, delete_metadata, Access.WRITE),
        Route("GET", MOONCAKE_LISTING_PATH, list_mooncake, Access.READ),
    ]


def _encode_value(record: Record) -> bytes:
    return decode_value(record.value)  # a Mooncake value: the bytes the engine put


async def _figures(registry: Registry, namespace: str, config: ServerConfig) -> list[KindFigures]:
    """A namespace's metadata keys, when it holds any."""
    keys = await registry.count(namespace, METADATA, DEFAULT_ROLE)
    return [KindFigures(METADATA, DEFAULT_ROLE, keys, None, 0.0)] if keys else []


FACE = Face.of_routes(
    "mooncake",
    _routes,
    paths=lambda: openapi.PATHS,
    schemas=lambda: openapi.SCHEMAS,
    contexts=(mooncake_probes_context,),
    kinds=(KindSpec(METADATA, _encode_value),),
    figures=_figures,
    settings=MooncakeSettings,
    order=40,
)
"""Mooncake's metadata keys: a segment's descriptor, an engine's RPC address."""
