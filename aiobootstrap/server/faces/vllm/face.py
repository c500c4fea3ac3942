"""The vLLM face: vLLM's Mooncake connector bootstrap (SPEC section 15), ``POST /register`` and
``GET /query`` on the registry, and ``GET /vllm`` for the page."""

from __future__ import annotations

from typing import Any

from ...._json import dumps
from ...._names import DEFAULT_ROLE
from ....core.history import LoggedChange
from ....core.registry import Registry
from ....store import Record
from ....wire.vllm import QUERY_PATH, REGISTER_PATH, VLLM_CLAIM, VLLM_LISTING_PATH, VLLM_WORKER, ranks_of_name
from ...config import ServerConfig
from ...face import Access, Face, Route
from ...kind_spec import KindFigures, KindSpec, NamespaceCount
from . import openapi
from .probes import vllm_probes_context
from .routes import list_vllm, query, query_bodies_context, register_worker
from .settings import VllmSettings

__all__ = ["FACE", "describe_change"]


def _routes() -> list[Route]:
    # A worker's registration is a write; decode's query a read (vLLM sends no token: see docs/api.md).
    return [
        Route("POST", REGISTER_PATH, register_worker, Access.WRITE),
        Route("GET", QUERY_PATH, query, Access.READ),
        Route("GET", VLLM_LISTING_PATH, list_vllm, Access.READ),
    ]


def _encode_value(record: Record) -> bytes:
    return dumps(record.value)


def describe_change(change: LoggedChange) -> list[dict[str, Any]]:
    """How ``GET /watch`` shows a worker's or a claim's change: the generic named form (``key``: the record's
    name, ``dp0-tp1-pp0`` or ``dp0``) with the ranks it names."""
    name = change.name or ""
    shown: dict[str, Any] = {"op": change.op, "kind": change.kind, "key": name}
    ranks = ranks_of_name(name)
    if ranks is not None:
        shown.update(zip(("dp_rank", "tp_rank", "pp_rank"), ranks, strict=True))
    elif name.startswith("dp") and name[2:].isdecimal():
        shown["dp_rank"] = int(name[2:])
    shown["version"] = change.version
    return [shown]


async def _workers(registry: Registry, namespace: str) -> int:
    return await registry.count(namespace, VLLM_WORKER, DEFAULT_ROLE)


async def _figures(registry: Registry, namespace: str, config: ServerConfig) -> list[KindFigures]:
    """A namespace's vLLM workers, when it holds any (vLLM declares no world size to the server)."""
    workers = await _workers(registry, namespace)
    return [KindFigures(VLLM_WORKER, DEFAULT_ROLE, workers, None, 0.0)] if workers else []


KINDS = (
    KindSpec(VLLM_WORKER, _encode_value, describe_change=describe_change),
    KindSpec(VLLM_CLAIM, _encode_value, describe_change=describe_change),
)
"""A worker's registration (named by its ranks), and a dp rank's engine claim (named by the dp rank)."""

WORKERS = NamespaceCount(
    "vllm_workers",
    _workers,
    description="vLLM prefill workers registered (POST /register).",
    metric="aiobootstrap_vllm_workers",
    help="vLLM prefill workers registered right now, by namespace.",
)
"""``/namespaces``' ``vllm_workers``, and the gauge ``aiobootstrap_vllm_workers``."""

FACE = Face.of_routes(
    "vllm",
    _routes,
    paths=lambda: openapi.PATHS,
    schemas=lambda: openapi.SCHEMAS,
    contexts=(query_bodies_context, vllm_probes_context),
    kinds=KINDS,
    figures=_figures,
    counts=(WORKERS,),
    settings=VllmSettings,
    order=50,
)
"""vLLM's prefill workers and decode's query, and the prober (``probes.py``) as its start-up and cleanup."""
