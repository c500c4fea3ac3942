"""The encoders face: SGLang's encoder URL list (register, unregister, list, the probes' findings),
and the prober that evicts dead encoders, started and stopped with the app."""

from __future__ import annotations

from typing import Any

from ...._names import DEFAULT_ROLE, ENCODER_URLS
from ....core.history import LoggedChange
from ....core.registry import Registry
from ....store import Record
from ....wire.results import encode_encoder_urls
from ....wire.routes import (
    ENCODER_HEALTH_PATH,
    ENCODER_LIST_PATH,
    ENCODER_REGISTER_PATH,
    ENCODER_UNREGISTER_PATH,
)
from ...face import Access, Face, Route
from ...kind_spec import KindSpec, NamespaceCount
from . import openapi
from .health import encoder_health_context
from .keys import encoder_list_key, encoder_urls
from .routes import encoder_url_health, list_encoder_urls, register_encoder_url, unregister_encoder_url
from .settings import EncoderSettings

__all__ = ["FACE", "describe_url_change"]


def _routes() -> list[Route]:
    return [
        Route("POST", ENCODER_REGISTER_PATH, register_encoder_url, Access.WRITE),
        Route("DELETE", ENCODER_UNREGISTER_PATH, unregister_encoder_url, Access.WRITE),
        Route("GET", ENCODER_LIST_PATH, list_encoder_urls, Access.READ),
        Route("GET", ENCODER_HEALTH_PATH, encoder_url_health, Access.READ),
    ]


def _encode_list(record: Record) -> bytes:
    return encode_encoder_urls(encoder_urls(record), record.version)


def describe_url_change(change: LoggedChange) -> list[dict[str, Any]]:
    """How ``GET /watch`` shows a change of the list: ``{"op", "kind", "url", "version"}``.

    The store changes the list one member at a time and tells each change with
    its member (``Change.member``), which the history keeps: ``put``, the URL
    joined the list; ``delete``, it left it (unregistered, evicted by the
    probes, or its lease ended). The evicted set (role ``evicted``: still
    probed, not listed) is shown to nobody, and neither is a change that names no URL.
    """
    url = change.member
    if url is None or change.role != DEFAULT_ROLE:
        return []
    return [{"op": change.op, "kind": change.kind, "url": url, "version": change.version}]


async def _listed(registry: Registry, namespace: str) -> int:
    return len(encoder_urls(await registry.get(encoder_list_key(namespace))))


URL_LIST = KindSpec(ENCODER_URLS, _encode_list, members=True, describe_change=describe_url_change)
"""A namespace's encoder URLs (role ``target``) and its evicted ones (role ``evicted``): each one set record."""

LISTED_URLS = NamespaceCount(
    "encoder_urls",
    _listed,
    metric="aiobootstrap_encoder_urls",
    help="Encoder URLs listed right now, by namespace.",
)
"""The URLs a namespace lists: ``/namespaces``' ``encoder_urls``, and ``aiobootstrap_encoder_urls``."""

FACE = Face.of_routes(
    "encoders",
    _routes,
    paths=lambda: openapi.PATHS,
    schemas=lambda: openapi.SCHEMAS,
    contexts=(encoder_health_context,),
    kinds=(URL_LIST,),
    counts=(LISTED_URLS,),
    settings=EncoderSettings,
    order=20,
)
"""The encoder URL routes, and the prober (``health.py``) as its start-up and cleanup."""
