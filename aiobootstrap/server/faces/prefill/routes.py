"""``/route``: prefill ranks register (``PUT``), decode asks for the topology and each rank's address
(``GET``), and an operator unregisters (``DELETE``), with the engines' replies where their code reads them.

The engines' server answers text ``OK``, the ``503`` sentence with the count
registered, the ``404`` sentence and the ``Missing inputs`` ``400`` in plain
text, and its JSON with ``json.dumps``' spacing: the same here, byte for byte.
Every other refusal is the server's JSON ``4xx``, where theirs was a ``500``.
``&wait=S`` holds a ``GET`` until its reply would be a ``200``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from aiohttp import web

from .... import wire
from ...._logging import clipped, printable
from ...._names import VERSION_HEADER
from ....wire.prefill import (
    MISSING_INPUTS,
    Coords,
    MissingInputs,
    coords_of,
    encode_address,
    not_found_text,
    not_ready_text,
    parse_prefill_rank,
    parse_route_query,
)
from ...appkeys import CONFIG, REGISTRY
from ...body import read_body
from ...fastpath.gets import GET_REPLIES, GetReply
from ..common import lease_of_body, namespace_of, param, wait_seconds
from .deployment import Deployment

__all__ = ["delete_route", "get_route", "list_prefill", "put_route"]

log = logging.getLogger("aiobootstrap")


def _deployment(request: web.Request) -> Deployment:
    return Deployment(request.app[REGISTRY], namespace_of(request))


def _route_query(request: web.Request) -> Coords | web.Response | None:
    """The four parameters (``None``: all), or the engines' text ``400`` when one is missing."""
    try:
        return parse_route_query(lambda name: param(request, name))
    except MissingInputs:
        return web.Response(status=400, text=MISSING_INPUTS)


async def put_route(request: web.Request) -> web.StreamResponse:
    """``PUT /route``: a prefill rank's address and layout (``"lease": ID`` puts it on that lease)."""
    payload = wire.parse_body(await read_body(request, request.app[CONFIG]))
    rank = parse_prefill_rank(payload)
    lease = lease_of_body(payload)
    record = await _deployment(request).register(rank, lease)
    log.info(
        "registered prefill rank %s at %s:%s version %d",
        rank.coords.name,
        printable(clipped(str(rank.value["rank_ip"]))),
        rank.value["rank_port"],
        record.version,
        extra={"namespace": record.key.namespace, "version": record.version},
    )
    return web.Response(text="OK")


async def get_route(request: web.Request) -> web.StreamResponse:
    """``GET /route``: the parallel info (all four ``-1``) or one rank's address, once the topology is complete."""
    coords = _route_query(request)
    if isinstance(coords, web.Response):
        return coords
    wait = wait_seconds(request)
    deadline = asyncio.get_running_loop().time() + wait
    deployment = _deployment(request)
    readiness = await (deployment.wait_complete(wait) if wait > 0 else deployment.readiness())
    if not readiness.complete or readiness.topology is None:
        return web.Response(status=503, text=not_ready_text(readiness.registered))
    if coords is None:
        return web.Response(body=readiness.topology.parallel_info(), content_type=wire.JSON_TYPE)
    record = await deployment.rank(coords)
    left = deadline - asyncio.get_running_loop().time()
    if record is None and left > 0:
        # Complete, but not this rank (outside the topology, or gone meanwhile): what is left of the wait.
        record = await deployment.wait_rank(coords, left)
    if record is None:
        return web.Response(status=404, text=not_found_text(coords))
    replies = request.app[GET_REPLIES]
    if replies.eligible(request):
        # Pre-built bytes, made once per version of the rank's record (the gets' fast path), as every get.
        return GetReply(request, replies, record)
    return web.Response(
        body=encode_address(record.value),
        content_type=wire.JSON_TYPE,
        headers={VERSION_HEADER: str(record.version)},
    )


async def delete_route(request: web.Request) -> web.StreamResponse:
    """``DELETE /route``: one rank (its four parameters), or the whole deployment (all four ``-1``)."""
    coords = _route_query(request)
    if isinstance(coords, web.Response):
        return coords
    deployment = _deployment(request)
    if coords is None:
        gone = await deployment.unregister_all()
        log.info(
            "unregistered the prefill deployment: %d records", gone, extra={"namespace": deployment.namespace}
        )
        return web.Response(text="OK")
    record = await deployment.unregister(coords)
    if record is None:
        return web.Response(status=404, text=not_found_text(coords))
    log.info("unregistered prefill rank %s", coords.name, extra={"namespace": deployment.namespace})
    return web.Response(text="OK")


_MISSING_SHOWN = 1024
"""The most missing ranks a listing names (a topology of millions of ranks still lists briefly)."""


async def list_prefill(request: web.Request) -> web.StreamResponse:
    """``GET /prefill``: the deployment as the page and ``status`` show it: its topology, each rank
    registered (coordinates, address, version, age), and the ones still missing."""
    deployment = _deployment(request)
    readiness = await deployment.readiness()
    records = await deployment.ranks()
    now = time.time()
    ranks = [
        {
            **coords_of(record.name or ""),
            "rank_ip": record.value.get("rank_ip"),
            "rank_port": record.value.get("rank_port"),
            "version": record.version,
            "age": round(max(0.0, now - record.registered_at), 3),
        }
        for record in records
    ]
    topology = readiness.topology
    present = {record.name for record in records}
    missing = [] if topology is None else [c.name for c in topology.coords() if c.name not in present]
    body = {
        "topology": None
        if topology is None
        else {k: v for k, v in topology.as_value().items() if k != "optional"},
        "expected": None if topology is None else topology.expected,
        "registered": readiness.registered,
        "complete": readiness.complete,
        "ranks": ranks,
        "missing": missing[:_MISSING_SHOWN],
        "missing_count": len(missing),
    }
    return web.Response(body=json.dumps(body).encode(), content_type=wire.JSON_TYPE)
