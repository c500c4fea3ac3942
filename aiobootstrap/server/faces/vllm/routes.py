"""``/register`` and ``/query``: vLLM's prefill workers register their side channels and decode reads them,
with the replies of vLLM's own server where its code reads them; ``/vllm`` lists them for the page.

``POST /register`` answers ``200`` ``{"status":"ok"}``, or ``400``
``{"detail": "Engine ID mismatch ..."}`` (vLLM's sentence) while another
live engine holds the dp rank; a malformed body is a ``400`` with one
sentence (vLLM's FastAPI answers ``422``; its worker stops on either).
``GET /query`` is vLLM's reply exactly, compact as FastAPI writes it, with the
namespace's version in ``X-Aiobootstrap-Version``; ``wait=S`` with
``tp_size``/``pp_size``/``dp_size`` (or ``after``) holds it on a core
condition until the deployment is whole, then ``503`` naming what is missing.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

from ...._json import dumps
from ...._logging import clipped, printable
from ...._names import DEFAULT_ROLE
from ....wire.errors import error_body
from ....wire.vllm import (
    LEASE_HEADER,
    READY_PARAMS,
    REGISTER_OK,
    VLLM_WORKER,
    parse_readiness,
    parse_register,
    query_reply,
)
from ...appkeys import CONFIG, REGISTRY
from ...body import read_body
from ...fastpath.replies import JsonReply, Reply
from ..common import after_of, namespace_of, param, wait_seconds
from .probes import VLLM_PROBES
from .readiness import QueryReady
from .settings import VllmSettings
from .workers import current, register, workers_of

__all__ = ["list_vllm", "query", "register_worker"]

log = logging.getLogger("aiobootstrap")

_OK = dumps(REGISTER_OK)
NOT_COMPLETE = "The vLLM deployment is not complete: "
"""The start of ``/query``'s ``503`` at the deadline; what is missing follows."""


async def register_worker(request: web.Request) -> Reply:
    """``POST /register``: a prefill worker's address (``X-Aiobootstrap-Lease: ID`` puts it on that lease)."""
    app = request.app
    worker = parse_register(await read_body(request, app[CONFIG]))
    header = request.headers.get(LEASE_HEADER)
    lease = header or None  # empty: no lease
    namespace = namespace_of(request)
    timeout = app[CONFIG].settings_of(VllmSettings).vllm_probe_timeout
    record = await register(app[REGISTRY], namespace, worker, lease, timeout)
    if log.isEnabledFor(logging.INFO):
        log.info(
            "registered vLLM worker %s of engine %s at %s version %d",
            worker.says(),
            printable(clipped(worker.engine_id)),
            printable(clipped(worker.addr)),
            record.version,
            extra={"namespace": namespace, "version": record.version},
        )
    return JsonReply(_OK)


async def query(request: web.Request) -> Reply:
    """``GET /query``: every dp rank's engine and workers' addresses, as vLLM's server answers; with
    ``wait=S&tp_size=N`` (or ``after=V``), once the deployment is whole (or changed), else a ``503``."""
    registry = request.app[REGISTRY]
    namespace = namespace_of(request)
    readiness = parse_readiness(
        {name: text for name in READY_PARAMS if (text := param(request, name)) is not None}
    )
    wait = wait_seconds(request)  # parsed either way: a malformed one is a 400
    after = after_of(request)
    if readiness is None and not after:
        wait = 0.0  # nothing to wait for: vLLM's query, at once
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        left = deadline - loop.time()
        if left > 0:
            await registry.wait_until(QueryReady(namespace, readiness, after), left)
        version = await registry.version(namespace)
        workers = current(await registry.records(namespace, VLLM_WORKER, DEFAULT_ROLE))
        missing = None if readiness is None else readiness.missing(workers)
        if missing is None or deadline - loop.time() <= 0:
            break
        # Whole by the records' names, not by their engines (a takeover between two writes): wait on.
    if missing is not None:
        detail = NOT_COMPLETE + missing
        return JsonReply(error_body(detail, registered=len(workers)), status=503, version=version)
    return JsonReply(dumps(query_reply(workers)), version=version)


_SHOWN = 4096
"""The most workers a listing names (a larger deployment still lists briefly, with the count)."""


async def list_vllm(request: web.Request) -> Reply:
    """``GET /vllm``: the namespace's vLLM workers as the page and ``status`` show them: each one's engine,
    ranks, address, version, age and (with probing on) its failed connects in a row."""
    registry = request.app[REGISTRY]
    namespace = namespace_of(request)
    records = await registry.records(namespace, VLLM_WORKER, DEFAULT_ROLE)
    probes = request.app.get(VLLM_PROBES)
    now = time.time()
    held = workers_of(records)
    workers = [
        {
            **worker.as_value(),
            "version": record.version,
            "age": round(max(0.0, now - record.registered_at), 3),
            "probe_failures": 0 if probes is None else probes.failures(record.key),
        }
        for record, worker in held[:_SHOWN]
    ]
    body = {
        "probing": probes is not None,
        "worker_count": len(held),
        "dp_ranks": len({worker.dp_rank for worker in current(records)}),
        "workers": workers,
    }
    return JsonReply(dumps(body))
