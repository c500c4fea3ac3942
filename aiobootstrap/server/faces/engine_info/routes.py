"""The per-rank record kinds: register, delete, get and batch get, one set of handlers made for each
kind, and their listing (``GET /ranks``).

Each handler returns what it answers (``fastpath/replies.py``): a registration
its ``OK``, a get a ``RecordWait`` of its key. The fast path's one responder
writes them, a woken waiter at the delivery that wakes it, before its task
resumes.
"""

from __future__ import annotations

import time

from aiohttp import web

from ....wire.bodies import (
    check_world_size,
    field_of,
    parse_body,
    parse_rank_field,
    parse_role_field,
    parse_role_param,
)
from ....wire.leases import parse_lease_field
from ....wire.params import parse_form, parse_rank_param, parse_ranks
from ....wire.routes import JSON_TYPE
from ...appkeys import CONFIG, REGISTRY
from ...body import read_body
from ...face import Access, ExpectHandler, Route
from ...fastpath.replies import BatchReply, FaceHandler, RecordWait, Reply, TextReply
from ...metrics import METRICS, counts_gets
from .. import records
from ..common import after_of, namespace_of, not_registered, param, wait_seconds
from .kinds import RecordKind, kind_named
from .log_lines import log_change

__all__ = ["kind_routes", "list_ranks"]


def kind_routes(kind: RecordKind, expect: ExpectHandler | None) -> list[web.RouteDef]:
    """The routes of one record kind: register, delete, get, batch get."""
    routes = [
        Route("PUT", kind.register_path, _register(kind), Access.WRITE),
        Route("DELETE", kind.register_path, _unregister(kind), Access.WRITE),
        Route("GET", kind.get_path, _get(kind), Access.READ),
        Route("GET", kind.batch_path, _get_batch(kind), Access.READ),
    ]
    return [route.definition(expect) for route in routes]


def _named(handler: FaceHandler, action: str, kind: RecordKind) -> FaceHandler:
    handler.__name__ = handler.__qualname__ = f"{action}_{kind.name}"
    return handler


_OK = TextReply("OK")


def _register(kind: RecordKind) -> FaceHandler:
    async def register(request: web.Request) -> Reply:
        app = request.app
        config = app[CONFIG]
        payload = parse_body(await read_body(request, config))
        rank = parse_rank_field(payload)
        role = parse_role_field(payload)
        value = kind.parse(field_of(payload, kind.field))
        lease = parse_lease_field(payload)
        check_world_size(rank, config.world_size)
        key = kind.key(namespace_of(request), role, rank)
        record = await app[REGISTRY].register(key, value, lease)
        app[METRICS].count_registration(key.namespace, kind.name)
        log_change("registered", record, kind, later=not config.access_log)
        return _OK

    return _named(register, "register", kind)


def _unregister(kind: RecordKind) -> FaceHandler:
    async def unregister(request: web.Request) -> Reply:
        rank = parse_rank_param(param(request, "rank"))
        role = parse_role_param(param(request, "role"))
        check_world_size(rank, request.app[CONFIG].world_size)
        record = await request.app[REGISTRY].unregister(kind.key(namespace_of(request), role, rank))
        if record is None:
            return not_registered(kind, [rank])
        log_change("unregistered", record, kind)
        return _OK

    return _named(unregister, "unregister", kind)


def _get(kind: RecordKind) -> FaceHandler:
    @counts_gets
    async def get(request: web.Request) -> Reply:
        app = request.app
        rank = parse_rank_param(param(request, "rank"))
        role = parse_role_param(param(request, "role"))
        wait = wait_seconds(request)
        after = after_of(request)
        whole = parse_form(param(request, "form"))
        check_world_size(rank, app[CONFIG].world_size)
        key = kind.key(namespace_of(request), role, rank)
        return RecordWait(key, after, wait, lambda: not_registered(kind, [rank]), whole, app[METRICS])

    return _named(get, "get", kind)


def _get_batch(kind: RecordKind) -> FaceHandler:
    @counts_gets
    async def get_batch(request: web.Request) -> Reply:
        ranks = parse_ranks(param(request, "ranks"))
        role = parse_role_param(param(request, "role"))
        wait = wait_seconds(request)
        after = after_of(request)
        whole = parse_form(param(request, "form"))
        check_world_size(ranks.last, request.app[CONFIG].world_size)
        namespace = namespace_of(request)
        registry = request.app[REGISTRY]
        since = time.time()
        found, missing = await registry.wait_all(namespace, kind.name, role, ranks, wait, after)
        request.app[METRICS].count_get(since, found, expired=bool(missing))
        if missing:
            return not_registered(kind, missing)
        version = await registry.version(namespace)
        asked = (namespace, kind.name, role, ranks, whole)
        return BatchReply(asked, found, version, kind.batch_field, kind.item, whole)

    return _named(get_batch, "get_batch", kind)


async def list_ranks(request: web.Request) -> web.Response:
    """``GET /ranks[?kind=K][&role=R]``: one kind and role's records (transfer-engine info, target)."""
    kind = kind_named(param(request, "kind"))
    role = parse_role_param(param(request, "role"))
    namespace = namespace_of(request)
    registry = request.app[REGISTRY]
    found = await registry.records(namespace, kind.name, role)
    body = records.encode_listing(
        found,
        await registry.version(namespace),
        request.app[CONFIG].world_size,
        registry.parked_in(namespace),
        time.time(),
        kind=kind.name,
        role=role,
        summary=kind.summary,
        leases=await registry.leases_of([(record.key, None) for record in found]),
        waiters_by_rank=registry.parking.by_rank(namespace, kind.name, role),
    )
    return web.Response(body=body, content_type=JSON_TYPE)
