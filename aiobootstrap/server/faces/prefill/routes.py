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
from typing import Any

from aiohttp import web

from ...._logging import clipped, printable
from ....wire.bodies import parse_body
from ....wire.leases import parse_lease_field
from ....wire.prefill import (
    MISSING_INPUTS,
    ROUTE_PARAMS,
    Coords,
    MissingInputs,
    Topology,
    coords_of,
    not_found_text,
    not_ready_text,
    parse_prefill_rank,
    parse_route_query,
)
from ....wire.prefill_fields import info_fields
from ...appkeys import CONFIG, REGISTRY
from ...body import read_body
from ...fastpath.replies import JsonReply, RecordReply, Reply, TextReply
from ..common import namespace_of, param, wait_seconds
from .deployment import Deployment

__all__ = ["delete_route", "get_route", "list_prefill", "put_route"]

log = logging.getLogger("aiobootstrap")


def _deployment(request: web.Request) -> Deployment:
    return Deployment(request.app[REGISTRY], namespace_of(request))


_OK = TextReply("OK")


_DP, _CP, _TP, _PP = ROUTE_PARAMS


def _all_four(request: web.Request) -> bool:
    """Whether the query is the four ``-1``s, each once, and nothing else (no ``wait``): decode's question for
    the parallel info as it asks it, every decode and every cycle, answered without the whole parse."""
    query = request.query
    return (
        len(query) == 4
        and query.get(_DP) == "-1"
        and query.get(_CP) == "-1"
        and query.get(_TP) == "-1"
        and query.get(_PP) == "-1"
    )


def _route_query(request: web.Request) -> Coords | TextReply | None:
    """The four parameters (``None``: all), or the engines' text ``400`` when one is missing."""
    try:
        return parse_route_query(lambda name: param(request, name))
    except MissingInputs:
        return TextReply(MISSING_INPUTS, 400)


async def put_route(request: web.Request) -> Reply:
    """``PUT /route``: a prefill rank's address and layout (``"lease": ID`` puts it on that lease)."""
    payload = parse_body(await read_body(request, request.app[CONFIG]))
    rank = parse_prefill_rank(payload)
    lease = parse_lease_field(payload)
    record = await _deployment(request).register(rank, lease)
    if log.isEnabledFor(logging.INFO):  # its fields take a while to make: a topology has thousands of ranks
        log.info(
            "registered prefill rank %s at %s:%s version %d",
            rank.coords.name,
            printable(clipped(str(rank.value["rank_ip"]))),
            rank.value["rank_port"],
            record.version,
            extra={"namespace": record.key.namespace, "version": record.version},
        )
    return _OK


async def get_route(request: web.Request) -> Reply:
    """``GET /route``: the parallel info (all four ``-1``) or one rank's address, once the topology is complete."""
    if _all_four(request):
        readiness = await _deployment(request).readiness()
        if not readiness.complete:
            return TextReply(not_ready_text(readiness.registered), 503)
        return JsonReply(readiness.info, shared=True)  # one bytes object per version of the topology
    coords = _route_query(request)
    if isinstance(coords, TextReply):
        return coords
    wait = wait_seconds(request)
    deadline = asyncio.get_running_loop().time() + wait
    deployment = _deployment(request)
    readiness = await (deployment.wait_complete(wait) if wait > 0 else deployment.readiness())
    if not readiness.complete or readiness.topology is None:
        return TextReply(not_ready_text(readiness.registered), 503)
    if coords is None:
        return JsonReply(readiness.info, shared=True)
    record = await deployment.rank(coords)
    left = deadline - asyncio.get_running_loop().time()
    if record is None and left > 0:
        # Complete, but not this rank (outside the topology, or gone meanwhile): what is left of the wait.
        record = await deployment.wait_rank(coords, left)
    if record is None:
        return TextReply(not_found_text(coords), 404)
    return RecordReply(record)  # its body made once per version of the rank's record, as every get's


async def delete_route(request: web.Request) -> Reply:
    """``DELETE /route``: one rank (its four parameters), or the whole deployment (all four ``-1``)."""
    coords = _route_query(request)
    if isinstance(coords, TextReply):
        return coords
    deployment = _deployment(request)
    if coords is None:
        gone = await deployment.unregister_all()
        log.info(
            "unregistered the prefill deployment: %d records", gone, extra={"namespace": deployment.namespace}
        )
        return _OK
    record = await deployment.unregister(coords)
    if record is None:
        return TextReply(not_found_text(coords), 404)
    log.info("unregistered prefill rank %s", coords.name, extra={"namespace": deployment.namespace})
    return _OK


_MISSING_SHOWN = 1024
"""The most missing ranks a listing names (a topology of millions of ranks still lists briefly)."""


def _listed(topology: Topology) -> dict[str, Any]:
    """The topology as the listing shows it: its sizes, page size, KV dtype and balance, and ``fields``, those
    passed through to decode as the parallel info carries them (which ``decode_allocation_policy``...)."""
    shown = {name: value for name, value in topology.as_value().items() if name != "optional"}
    return {**shown, "fields": info_fields(dict(topology.fields))}


async def list_prefill(request: web.Request) -> Reply:
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
    present = {record.name for record in records if record.name}
    missing, missing_count = ([], 0) if topology is None else topology.missing(present, _MISSING_SHOWN)
    body = {
        "topology": None if topology is None else _listed(topology),
        "expected": None if topology is None else topology.expected,
        "registered": readiness.registered,
        "complete": readiness.complete,
        "ranks": ranks,
        "missing": missing,
        "missing_count": missing_count,
    }
    return JsonReply(json.dumps(body).encode())
