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
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

from ...._json import dumps
from ...._logging import clipped, printable
from ...._names import DEFAULT_ROLE
from ....wire.errors import error_body
from ....wire.vllm import (
    LEASE_HEADER,
    NOT_COMPLETE,
    READY_PARAMS,
    REGISTER_OK,
    VLLM_WORKER,
    Worker,
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

__all__ = ["QUERY_BODIES", "QueryBodies", "list_vllm", "query", "query_bodies_context", "register_worker"]

log = logging.getLogger("aiobootstrap")

_OK = dumps(REGISTER_OK)


async def register_worker(request: web.Request) -> Reply:
    """``POST /register``: a prefill worker's address (``X-Aiobootstrap-Lease: ID`` puts it on that lease)."""
    app = request.app
    worker = parse_register(await read_body(request, app[CONFIG]))
    header = request.headers.get(LEASE_HEADER)
    lease = header or None  # empty: no lease
    namespace = namespace_of(request)
    timeout = app[CONFIG].settings_of(VllmSettings).vllm_probe_timeout
    record = await register(app[REGISTRY], namespace, worker, lease, timeout)
    if record is not None and log.isEnabledFor(logging.INFO):  # the same again changes nothing: not logged
        log.info(
            "registered vLLM worker %s of engine %s at %s version %d",
            worker.says(),
            printable(clipped(worker.engine_id)),
            printable(clipped(worker.addr)),
            record.version,
            extra={"namespace": namespace, "version": record.version},
        )
    return JsonReply(_OK, shared=True)  # one bytes object: its whole 200 made once per variant and second


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
    bodies = request.app[QUERY_BODIES]
    while True:
        left = deadline - loop.time()
        if left > 0:
            await registry.wait_until(QueryReady(namespace, readiness, after), left)
        version = await registry.version(namespace)
        made = bodies.get(namespace, version)
        if made is None:
            workers = current(await registry.records(namespace, VLLM_WORKER, DEFAULT_ROLE))
            made = bodies.keep(namespace, version, workers)
        if readiness is None:
            return JsonReply(made.body, version=version, shared=True)  # one bytes object per version
        workers = made.workers
        missing = readiness.missing(workers)
        if missing is None or deadline - loop.time() <= 0:
            break
        # Whole by the records' names, not by their engines (a takeover between two writes): wait for a
        # change after what was read.
        after = max(after, version)
    if missing is not None:
        detail = NOT_COMPLETE + missing
        return JsonReply(error_body(detail, registered=len(workers)), status=503, version=version)
    return JsonReply(made.body, version=version, shared=True)


@dataclass(frozen=True, slots=True)
class Made:
    """A namespace's ``/query`` as of a version: its workers and its body."""

    version: int
    workers: list[Worker]
    body: bytes


class QueryBodies:
    """Each namespace's last ``/query`` body, by the namespace's version it was read at: decode's and a
    proxy's queries between two changes cost a version read (the records are read, and the body made, once
    per version). At most :data:`_KEPT_BYTES` of bodies, the least recently asked namespace's dropped first."""

    def __init__(self) -> None:
        self._made: OrderedDict[str, Made] = OrderedDict()
        self._bytes = 0

    def get(self, namespace: str, version: int) -> Made | None:
        made = self._made.get(namespace)
        if made is None or made.version != version:
            return None
        self._made.move_to_end(namespace)
        return made

    def keep(self, namespace: str, version: int, workers: list[Worker]) -> Made:
        """``workers``, read at or after ``version``, kept with their body (records read after a newer change
        are kept under the older version: a later query reads the newer version, and makes its own)."""
        made = Made(version, workers, dumps(query_reply(workers)))
        old = self._made.pop(namespace, None)
        self._bytes += len(made.body) - (0 if old is None else len(old.body))
        self._made[namespace] = made
        while self._bytes > _KEPT_BYTES and len(self._made) > 1:
            _, dropped = self._made.popitem(last=False)
            self._bytes -= len(dropped.body)
        return made


_KEPT_BYTES = 64 << 20
"""The most bytes of ``/query`` bodies kept (the namespace asked last is always kept)."""


async def query_bodies_context(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx``: the app's :class:`QueryBodies`."""
    app[QUERY_BODIES] = QueryBodies()
    yield


QUERY_BODIES = web.AppKey("vllm_query_bodies", QueryBodies)


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
