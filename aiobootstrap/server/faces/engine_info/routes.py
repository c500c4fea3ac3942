"""The per-rank record kinds: register, delete, get and batch get, one set of handlers made for each kind.

A get's ``200`` and a registration's ``OK`` take the fast path
(``fastpath/gets.py``) whenever ``GetReplies.eligible`` allows it: a waiter
announces itself with ``GetReplies.expect`` and may be answered at the
delivery that wakes it, before its task resumes.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web
from aiohttp.typedefs import Handler

from .... import wire
from ....exceptions import BootstrapError
from ....store import Record
from ...appkeys import CONFIG, REGISTRY
from ...body import read_body
from ...face import ExpectHandler
from ...fastpath.batches import BATCH_REPLIES, Parts, batch_parts
from ...fastpath.gets import GET_REPLIES, GetReplies, GetReply
from ...metrics import METRICS, counts_gets
from ..common import after_of, json_reply, lease_of_body, namespace_of, not_registered, param, wait_seconds
from ..kinds import RecordKind
from ..log_lines import log_change

__all__ = ["kind_routes"]

_ENCODE_CHUNK = 4096
"""Batch items encoded between two turns of the loop."""


def kind_routes(kind: RecordKind, expect: ExpectHandler | None) -> list[web.RouteDef]:
    """The routes of one record kind: register, delete, get, batch get."""
    return [
        web.put(kind.register_path, _register(kind), expect_handler=expect),
        web.delete(kind.register_path, _unregister(kind), expect_handler=expect),
        web.get(kind.get_path, _get(kind), expect_handler=expect),
        web.get(kind.batch_path, _get_batch(kind), expect_handler=expect),
    ]


def _named(handler: Handler, action: str, kind: RecordKind) -> Handler:
    handler.__name__ = handler.__qualname__ = f"{action}_{kind.name}"
    return handler


def _register(kind: RecordKind) -> Handler:
    async def register(request: web.Request) -> web.StreamResponse:
        app = request.app
        config = app[CONFIG]
        payload = wire.parse_body(await read_body(request, config))
        rank = wire.parse_rank_field(payload)
        role = wire.parse_role_field(payload)
        value = kind.parse(wire.field_of(payload, kind.field))
        lease = lease_of_body(payload)
        wire.check_world_size(rank, config.world_size)
        key = kind.key(namespace_of(request), role, rank)
        record = await app[REGISTRY].register(key, value, lease)
        app[METRICS].count_registration(key.namespace, kind.name)
        log_change("registered", record, kind, later=not config.access_log)
        replies = app[GET_REPLIES]
        return GetReply(request, replies, None) if replies.eligible(request) else web.Response(text="OK")

    return _named(register, "register", kind)


def _unregister(kind: RecordKind) -> Handler:
    async def unregister(request: web.Request) -> web.StreamResponse:
        rank = wire.parse_rank_param(param(request, "rank"))
        role = wire.parse_role_param(param(request, "role"))
        wire.check_world_size(rank, request.app[CONFIG].world_size)
        record = await request.app[REGISTRY].unregister(kind.key(namespace_of(request), role, rank))
        if record is None:
            return not_registered(kind, [rank])
        log_change("unregistered", record, kind)
        return web.Response(text="OK")

    return _named(unregister, "unregister", kind)


def _get(kind: RecordKind) -> Handler:
    @counts_gets
    async def get(request: web.Request) -> web.StreamResponse:
        app = request.app
        rank = wire.parse_rank_param(param(request, "rank"))
        role = wire.parse_role_param(param(request, "role"))
        wait = wait_seconds(request)
        after = after_of(request)
        whole = wire.parse_form(param(request, "form"))
        wire.check_world_size(rank, app[CONFIG].world_size)
        key = kind.key(namespace_of(request), role, rank)
        replies = app[GET_REPLIES]
        prebuilt = replies.eligible(request)
        # A woken waiter's reply may be written at its delivery, before this task resumes.
        pending = replies.expect(request, key, after) if prebuilt and not whole and wait > 0 else None
        since = time.time()
        record: Record | None = None
        try:
            record = await app[REGISTRY].wait(key, wait, after)
        except BootstrapError:
            if pending is None or pending.record is None:
                raise  # not answered yet: the error is the answer
        finally:
            sent = None if pending is None else replies.settle(pending)
        if sent is not None:
            record = sent  # answered already, whatever came after (a newer record, a shutdown, an outage)
        app[METRICS].count_get(since, [] if record is None else [record], expired=record is None)
        if record is None:
            return not_registered(kind, [rank])
        if whole:
            return await json_reply(request, replies.body(record, whole=True), version=record.version)
        if prebuilt:
            return GetReply(request, replies, record, pending)
        return await json_reply(request, replies.body(record), version=record.version)

    return _named(get, "get", kind)


def _get_batch(kind: RecordKind) -> Handler:
    @counts_gets
    async def get_batch(request: web.Request) -> web.StreamResponse:
        ranks = wire.parse_ranks(param(request, "ranks"))
        role = wire.parse_role_param(param(request, "role"))
        wait = wait_seconds(request)
        after = after_of(request)
        whole = wire.parse_form(param(request, "form"))
        wire.check_world_size(ranks.last, request.app[CONFIG].world_size)
        namespace = namespace_of(request)
        registry = request.app[REGISTRY]
        since = time.time()
        found, missing = await registry.wait_all(namespace, kind.name, role, ranks, wait, after)
        request.app[METRICS].count_get(since, found, expired=bool(missing))
        if missing:
            return not_registered(kind, missing)
        version = await registry.version(namespace)
        # The getters woken together share one reply, and every getter a large item's body (its parts).
        shared, asked = request.app[BATCH_REPLIES], (namespace, kind.name, role, ranks, whole)
        body = shared.get(asked, found, version)
        if body is None:
            body = await _batch_body(kind, request.app[GET_REPLIES], found, version, whole)
            shared.keep(asked, found, version, body)
        return await json_reply(request, body)

    return _named(get_batch, "get_batch", kind)


async def _batch_body(
    kind: RecordKind, replies: GetReplies, found: list[Record], version: int, whole: bool
) -> Parts:
    items: list[bytes] = []
    for start in range(0, len(found), _ENCODE_CHUNK):
        if start:
            # Tens of thousands of records not encoded yet take a while: let other requests in.
            await asyncio.sleep(0)
        items.extend(
            kind.item(record, replies.body(record, whole)) for record in found[start : start + _ENCODE_CHUNK]
        )
    return batch_parts(kind.batch_field, items, version)
