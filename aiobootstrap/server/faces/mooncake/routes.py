"""``/metadata?key=K``: Mooncake's transfer engines store and read their segment descriptors and RPC
addresses, with the replies of Mooncake's own server (its texts, an exact ``200`` for success).

A key is a named record of kind ``metadata`` (its name the key, kept exactly);
its value the body, byte for byte. An engine's RPC entry (a key holding
``rpc_meta``) is never taken over: a ``PUT`` of another value while one is
stored is the ``400`` Mooncake's server answers, and the check is one step
with the write (``register_if``), across replicas. ``GET`` waits with
``wait=S`` (and ``after=V``); every reply for a key carries its version.
"""

from __future__ import annotations

import json
import logging
import time

from aiohttp import web

from ...._logging import clipped, printable
from ...._names import DEFAULT_ROLE
from ....exceptions import BadRequest
from ....store import ABSENT, Key, Record
from ....wire.leases import parse_lease_field
from ....wire.metadata import (
    DELETED,
    DUPLICATE,
    KEY_REQUIRED,
    LEASE_HEADER,
    METADATA,
    NOT_FOUND,
    UNCHANGED,
    UPDATED,
    encode_value,
    is_rpc_meta,
)
from ...appkeys import CONFIG, REGISTRY
from ...body import read_body
from ...fastpath.replies import JsonReply, RecordWait, Reply, TextReply
from ..common import after_of, namespace_of, param, wait_seconds
from .engines import engines_of
from .probes import MOONCAKE_PROBES

__all__ = ["delete_metadata", "get_metadata", "list_mooncake", "put_metadata"]

log = logging.getLogger("aiobootstrap")


def _key(request: web.Request) -> Key | TextReply:
    """The key asked for, or Mooncake's text ``400`` when there is none."""
    name = param(request, "key")
    if not name:
        return TextReply(KEY_REQUIRED, 400)
    try:
        return Key.named(namespace_of(request), METADATA, DEFAULT_ROLE, name)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def _updated(record: Record) -> TextReply:
    """A ``PUT``'s ``200`` ``metadata updated`` (an engine re-``PUT``s its descriptor at each memory
    registration: the responder writes it as pre-built bytes where the app allows them)."""
    return TextReply(UPDATED, version=record.version)


_NOT_FOUND = TextReply(NOT_FOUND, 404)


def _not_found() -> TextReply:
    return _NOT_FOUND


async def get_metadata(request: web.Request) -> Reply:
    """``GET /metadata?key=K[&wait=S][&after=V]``: the value last stored, byte for byte (its body made once
    per version: an engine's peers read its descriptor far more often than it changes)."""
    key = _key(request)
    if isinstance(key, TextReply):
        return key
    return RecordWait(key, after_of(request), wait_seconds(request), _not_found)


async def put_metadata(request: web.Request) -> Reply:
    """``PUT /metadata?key=K``: store the body (``X-Aiobootstrap-Lease: ID`` puts it on that lease)."""
    key = _key(request)
    if isinstance(key, TextReply):
        return key
    app = request.app
    body = await read_body(request, app[CONFIG])
    header = request.headers.get(LEASE_HEADER)
    lease = parse_lease_field({"lease": header}) if header else None  # empty: no lease
    value = encode_value(body)
    registry = app[REGISTRY]
    if not is_rpc_meta(key.name or ""):
        return _updated(await registry.register(key, value, lease))
    while True:
        current = await registry.get(key)
        if current is not None:
            if current.value != value:
                log.info("refused rpc_meta %s: another engine holds it", printable(clipped(key.name or "")))
                return TextReply(DUPLICATE, 400)
            return TextReply(UNCHANGED, version=current.version)
        record = await registry.register_if(key, value, ABSENT, lease)
        if record is not None:
            return _updated(record)
        # Another engine wrote it meanwhile, here or through another replica: compare with what it wrote.


async def delete_metadata(request: web.Request) -> Reply:
    """``DELETE /metadata?key=K``: forget the key (an engine's at its normal exit; Mooncake's store master
    deletes both keys of a client whose heartbeat timed out): Mooncake's ``200`` ``metadata deleted``, or its
    ``404`` ``metadata not found`` for a key already gone (as Mooncake's own server answers both callers)."""
    key = _key(request)
    if isinstance(key, TextReply):
        return key
    record = await request.app[REGISTRY].unregister(key)
    return _NOT_FOUND if record is None else TextReply(DELETED)


_ENGINES_SHOWN = 4096
"""The most engines a listing names (a namespace of more still lists briefly, with the count)."""


async def list_mooncake(request: web.Request) -> Reply:
    """``GET /mooncake``: the namespace's Mooncake engines as the page and ``status`` show them: each
    engine's name, its RPC address, whether its segment is registered and with how many buffers, and
    (with probing on) its failed probes in a row."""
    namespace = namespace_of(request)
    records = await request.app[REGISTRY].records(namespace, METADATA, DEFAULT_ROLE)
    probes = request.app.get(MOONCAKE_PROBES)
    engines = engines_of(records, now=time.time(), failures=None if probes is None else probes.failures)
    body = {
        "keys": len(records),
        "probing": probes is not None,
        "engines": engines[:_ENGINES_SHOWN],
        "engine_count": len(engines),
    }
    return JsonReply(json.dumps(body).encode())
