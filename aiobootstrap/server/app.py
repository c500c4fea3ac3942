"""The HTTP layer: an aiohttp app that adapts requests to the registry.

It knows nothing of sockets or signals (see ``_server``): a test drives it
with ``aiohttp_client(create_app(config))``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from .. import wire as protocol
from .._logging import printable
from .._names import (
    BOOT_HEADER,
    DEFAULT_NAMESPACE,
    DEFAULT_ROLE,
    ENCODER_URLS,
    HEALTH_HEADER,
    TRANSFER_ENGINE_INFO,
    VERSION_HEADER,
)
from .._ranks import RankSet
from .._registry import Registry
from .._version import __version__
from ..exceptions import (
    BadRequest,
    BodyBudgetExhausted,
    BootstrapError,
    NotRegistered,
    PayloadTooLarge,
    RequestTimeout,
    StoreUnavailable,
    TooManyWaiters,
    UnreadableBody,
)
from ..store import Key, Record, StoreLimits
from ..store.url import open_store
from ..wire import ENCODER_LIST_PATH, ENCODER_REGISTER_PATH, ENCODER_UNREGISTER_PATH
from . import kinds as _kinds
from . import records
from .access import GUARD, Guard, classify
from .auth import ExpectHandler, UnroutedExpect, auth_middleware, expect_handler
from .body import BODY_BUDGET, BodyBudget, read_body, too_large_detail
from .config import ServerConfig
from .errors import json_error
from .kinds import (
    TRANSFER_ENGINE_INFO_KIND,
    RecordKind,
    encode_reply,
    encoder_list_key,
    encoder_urls,
    kind_named,
)
from .metrics import (
    METRICS,
    NAMESPACE_FIGURES,
    Metrics,
    NamespaceFigures,
    counts_gets,
    metrics,
    metrics_middleware,
)
from .openapi import openapi
from .replies import SEPARATE_BODY_OVER, EarlyReply, ReplyWire, WireReply

__all__ = ["CONFIG", "REGISTRY", "REPLY_WIRE", "create_app"]

log = logging.getLogger("aiobootstrap")

CONFIG = web.AppKey("config", ServerConfig)
REGISTRY = web.AppKey("registry", Registry)
"""The registry of every namespace, and through it the store."""
REPLY_WIRE = web.AppKey("reply_wire", ReplyWire)
"""Gets' 200 replies as pre-built bytes (see ``_replies``)."""


def create_app(config: ServerConfig | None = None) -> web.Application:
    """The aiobootstrap app for ``config`` (defaults when omitted)."""
    config = config if config is not None else ServerConfig()
    tokens = config.tokens
    guard = None if tokens is None else Guard(tokens, open_reads=config.auth_reads == "open")
    middlewares: list[Middleware] = [metrics_middleware, error_middleware]
    if guard is not None:
        # Inside the error middleware, before any handler: a refused request
        # has nothing read and nothing changed.
        middlewares.append(auth_middleware(guard))
    app = web.Application(middlewares=middlewares, client_max_size=config.max_body_size)
    app[CONFIG] = config
    app[BODY_BUDGET] = BodyBudget(config.max_body_memory)
    app[METRICS] = Metrics()
    app[NAMESPACE_FIGURES] = lambda: _namespace_figures(app)
    app.on_response_prepare.append(_boot_header)
    app.cleanup_ctx.append(_registry_context)
    app.on_shutdown.append(_release_waiters)
    # aiohttp answers Expect before any middleware: this one checks the token and size first.
    expect = expect_handler(config, guard)
    routes = _routes(expect)
    app.router.add_routes(routes)
    app.router.add_routes(_namespaced(routes))
    # Server-wide routes: one server, one set of metrics, one API description.
    app.router.add_get(protocol.READY_PATH, ready, expect_handler=expect)
    app.router.add_get(protocol.METRICS_PATH, metrics, expect_handler=expect)
    app.router.add_get(
        protocol.OPENAPI_PATH,
        openapi(token=guard is not None, open_reads=config.auth_reads == "open"),
        expect_handler=expect,
    )
    # Last: a request with Expect that no route above matched gets the same answers.
    app.router.register_resource(UnroutedExpect(app.router, guard))
    # Every route is a probe, a read or a write in access.py's one table, or the app is not made.
    classified = classify(app.router)
    if guard is not None:
        guard.routes = classified
        app[GUARD] = guard
    return app


def _routes(expect: ExpectHandler | None = None) -> list[web.RouteDef]:
    """The bootstrap routes: each is also served under ``/ns/{namespace}``."""
    return [
        web.get(protocol.HEALTH_PATH, health, expect_handler=expect),
        *[route for kind in _kinds.KINDS for route in _kind_routes(kind, expect)],
        web.get(protocol.RANKS_PATH, list_ranks, expect_handler=expect),
        web.post(ENCODER_REGISTER_PATH, register_encoder_url, expect_handler=expect),
        web.delete(ENCODER_UNREGISTER_PATH, unregister_encoder_url, expect_handler=expect),
        web.get(ENCODER_LIST_PATH, list_encoder_urls, expect_handler=expect),
    ]


def _namespaced(routes: Iterable[web.RouteDef]) -> list[web.RouteDef]:
    return [
        web.RouteDef(route.method, protocol.path(route.path, "{namespace}"), route.handler, route.kwargs)
        for route in routes
    ]


async def _registry_context(app: web.Application) -> AsyncIterator[None]:
    config = app[CONFIG]
    limits = StoreLimits(
        # A world size already bounds the ranks; the cap guards servers without one.
        max_ranks=config.max_ranks if config.world_size is None else None,
        max_namespaces=config.max_namespaces,
    )
    store = open_store(config.store_url, prefix=config.store_prefix, limits=limits)
    registry = Registry(store, encode_reply=encode_reply, max_waiters=config.max_waiters)
    await store.open(registry)
    app[REGISTRY] = registry
    # The bytes carry the boot-id stamp themselves: only when nothing else hooks a reply's headers.
    stamps_only = list(app.on_response_prepare) == [_boot_header]
    app[REPLY_WIRE] = ReplyWire(registry.reply, lambda: store.incarnation, enabled=stamps_only)
    log.info("store: %s", store.description)
    try:
        yield
    finally:
        registry.close()
        await store.close()


async def _release_waiters(app: web.Application) -> None:
    # Parked long-polls answer 503 now, instead of holding shutdown until they expire.
    app[REGISTRY].close()


async def _boot_header(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: every reply, errors included, names the store's incarnation."""
    registry = request.app.get(REGISTRY)
    if registry is not None:
        response.headers[BOOT_HEADER] = registry.store.incarnation


async def _namespace_figures(app: web.Application) -> list[NamespaceFigures]:
    registry = app[REGISTRY]
    store = registry.store
    names = sorted(set(await store.namespaces()) | set(registry.parked_namespaces()))
    return [
        NamespaceFigures(
            name,
            len(await store.records(name, TRANSFER_ENGINE_INFO, DEFAULT_ROLE)),
            registry.parked_in(name),
            await store.version(name),
            len(encoder_urls(await store.get(encoder_list_key(name)))),
        )
        for name in names
    ]


# -- errors -------------------------------------------------------------


_HTTP_DETAILS = {
    404: "No such route; see the API reference for the routes this server answers.",
    405: "This route does not take that method.",
}


_BODY_LEFT_UNREAD = (UnreadableBody, RequestTimeout, PayloadTooLarge, BodyBudgetExhausted)
"""Errors answered before the body was read in full: the connection is closed after the reply."""


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every error into a JSON ``{"detail": ...}`` reply; never a traceback."""
    try:
        return await handler(request)
    except BootstrapError as exc:
        headers = None
        if isinstance(exc, TooManyWaiters | StoreUnavailable | BodyBudgetExhausted):
            headers = {"Retry-After": f"{exc.retry_after:g}"}
        response = json_error(exc.status, exc.detail, headers)
        if isinstance(exc, _BODY_LEFT_UNREAD):
            # The rest of the body may still be on its way: the connection cannot carry another request.
            response.force_close()
        return response
    except web.HTTPRequestEntityTooLarge:
        response = json_error(413, too_large_detail(request.app[CONFIG].max_body_size))
        response.force_close()
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        detail = _HTTP_DETAILS.get(exc.status, exc.reason)
        return json_error(exc.status, detail, {k: v for k, v in exc.headers.items() if k == "Allow"})
    except Exception:
        log.exception("Unexpected error answering %s %s", request.method, request.path)
        return json_error(500, "The server failed to answer this request; see its log.")


# -- routes -------------------------------------------------------------


async def health(request: web.Request) -> web.Response:
    namespace_of(request)  # /ns/<not a namespace>/health is a 400, as on every other route
    # The header tells a port-clash probe (see _portinfo) that an aiobootstrap server holds the port.
    return web.Response(text="OK", headers={HEALTH_HEADER: __version__})


async def ready(request: web.Request) -> web.Response:
    """``GET /ready``: ``OK`` while the store answers, ``503`` (JSON) while it does not."""
    await request.app[REGISTRY].store.ping()
    return web.Response(text="OK")


def namespace_of(request: web.Request) -> str:
    """The namespace a request addresses: its ``/ns/{namespace}`` prefix, or the default."""
    name = request.match_info.get("namespace")
    return DEFAULT_NAMESPACE if name is None else protocol.check_namespace(name)


def info_key(request: web.Request, rank: int) -> Key:
    """The key of ``rank``'s transfer-engine info (role ``target``) in the namespace a request addresses."""
    return Key(namespace_of(request), TRANSFER_ENGINE_INFO, DEFAULT_ROLE, rank)


_SEPARATE_BODY_OVER = SEPARATE_BODY_OVER


async def json_reply(request: web.Request, body: bytes, version: int | None = None) -> web.StreamResponse:
    """A 200 JSON reply of ``body``, which may be shared by many replies at once.

    ``version``, when given, goes in the ``X-Aiobootstrap-Version`` header.
    """
    headers = {} if version is None else {VERSION_HEADER: str(version)}
    if len(body) <= _SEPARATE_BODY_OVER:
        return web.Response(body=body, content_type=protocol.JSON_TYPE, headers=headers)
    # web.Response joins headers and body into one new bytes object (on Python
    # before 3.12.9): a private copy of a 20 MB reply per getter in flight.
    # Written apart, every getter sends the registration's one bytes object.
    response = web.StreamResponse(headers={"Content-Type": protocol.JSON_TYPE, **headers})
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body)
    await response.write_eof()
    return response


def _param(request: web.Request, name: str) -> str | None:
    values = request.query.getall(name, [])
    if len(values) > 1:
        raise BadRequest(f"The {name} parameter is given more than once.")
    return values[0] if values else None


def _wait_seconds(request: web.Request) -> float:
    return min(protocol.parse_wait(_param(request, "wait")), request.app[CONFIG].max_wait)


# -- the per-rank kinds: one set of handlers, made for each entry of KINDS --


def _kind_routes(kind: RecordKind, expect: ExpectHandler | None) -> list[web.RouteDef]:
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
        config = request.app[CONFIG]
        payload = protocol.parse_body(await read_body(request, config))
        rank = protocol.parse_rank_field(payload)
        role = protocol.parse_role_field(payload)
        value = kind.parse(protocol.field_of(payload, kind.field))
        protocol.check_world_size(rank, config.world_size)
        key = kind.key(namespace_of(request), role, rank)
        app = request.app
        record = await app[REGISTRY].register(key, value)
        app[METRICS].count_registration(key.namespace, kind.name)
        if log.isEnabledFor(logging.INFO):
            _log_change("registered", record, kind)
        wire = app[REPLY_WIRE]
        return WireReply(request, wire, None) if _prebuilt(request, wire) else web.Response(text="OK")

    return _named(register, "register", kind)


def _unregister(kind: RecordKind) -> Handler:
    async def unregister(request: web.Request) -> web.StreamResponse:
        rank = protocol.parse_rank_param(_param(request, "rank"))
        role = protocol.parse_role_param(_param(request, "role"))
        protocol.check_world_size(rank, request.app[CONFIG].world_size)
        record = await request.app[REGISTRY].unregister(kind.key(namespace_of(request), role, rank))
        if record is None:
            return _not_registered(kind, [rank])
        _log_change("unregistered", record, kind)
        return web.Response(text="OK")

    return _named(unregister, "unregister", kind)


def _prebuilt(request: web.Request, wire: ReplyWire) -> bool:
    """Whether this request's 200 may be pre-built bytes: nothing but the boot-id stamp hooks its headers.

    Mounted as another app's sub-app, the outer app's ``on_response_prepare`` runs too.
    """
    return wire.enabled and len(request.match_info.apps) == 1


def _get(kind: RecordKind) -> Handler:
    async def get(request: web.Request) -> web.StreamResponse:
        # Errors are counted here, not by @counts_gets: one coroutine frame less per parked waiter.
        app = request.app
        try:
            rank = protocol.parse_rank_param(_param(request, "rank"))
            role = protocol.parse_role_param(_param(request, "role"))
            wait = _wait_seconds(request)
            after = protocol.parse_after(_param(request, "after"))
            whole = protocol.parse_form(_param(request, "form"))
            protocol.check_world_size(rank, app[CONFIG].world_size)
            key = kind.key(namespace_of(request), role, rank)
            registry = app[REGISTRY]
            wire = app[REPLY_WIRE]
            # A woken waiter's reply is written by the registry's delivery, before this task resumes.
            prebuilt = _prebuilt(request, wire)
            early = EarlyReply(request, wire) if prebuilt and not whole and wait > 0 else None
            since = time.time()
            try:
                record = await registry.wait(key, wait, after, early=early)
            except BootstrapError:
                if early is None or early.record is None:
                    raise
            if early is not None and early.record is not None:
                record = early.record  # answered already, whatever came after (a shutdown, an outage)
        except NotRegistered:
            raise
        except BootstrapError:
            app[METRICS].gets["rejected"] += 1
            raise
        app[METRICS].count_get(since, [] if record is None else [record], expired=record is None)
        if record is None:
            return _not_registered(kind, [rank])
        if whole:
            return await json_reply(request, kind.encode_object(record), version=record.version)
        if prebuilt:
            return WireReply(request, wire, record, early)
        return await json_reply(request, registry.reply(record), version=record.version)

    return _named(get, "get", kind)


def _get_batch(kind: RecordKind) -> Handler:
    @counts_gets
    async def get_batch(request: web.Request) -> web.StreamResponse:
        ranks = protocol.parse_ranks(_param(request, "ranks"))
        role = protocol.parse_role_param(_param(request, "role"))
        wait = _wait_seconds(request)
        after = protocol.parse_after(_param(request, "after"))
        whole = protocol.parse_form(_param(request, "form"))
        protocol.check_world_size(ranks.last, request.app[CONFIG].world_size)
        namespace = namespace_of(request)
        registry = request.app[REGISTRY]
        since = time.time()
        found, missing = await registry.wait_all(namespace, kind.name, role, ranks, wait, after)
        request.app[METRICS].count_get(since, found, expired=bool(missing))
        if missing:
            return _not_registered(kind, missing)
        version = await registry.store.version(namespace)
        encode = kind.encode_object if whole else registry.reply
        items: list[bytes] = []
        for start in range(0, len(found), _ENCODE_CHUNK):
            if start:
                # Tens of thousands of records not encoded yet take a while: let other requests in.
                await asyncio.sleep(0)
            items.extend(kind.item(record, encode(record)) for record in found[start : start + _ENCODE_CHUNK])
        return await json_reply(request, protocol.encode_items(kind.batch_field, items, version))

    return _named(get_batch, "get_batch", kind)


_ENCODE_CHUNK = 4096
"""Batch items encoded between two turns of the loop."""


def _not_registered(kind: RecordKind, missing: list[int] | RankSet) -> web.Response:
    # Not raised: the 404 carries "missing", which tells the client a rank's 404 from a wrong URL's.
    # A batch's (a RankSet) lists a bounded head of its ranks, and all of them as ranges.
    return web.Response(
        status=404, body=protocol.encode_not_registered(missing, kind.noun), content_type=protocol.JSON_TYPE
    )


def _log_change(action: str, record: Record, kind: RecordKind) -> None:
    """One line per registration or deletion, with structured fields for JSON logs."""
    key = record.key
    where = "" if key.namespace == DEFAULT_NAMESPACE else f" in namespace {key.namespace}"
    what = "" if kind is TRANSFER_ENGINE_INFO_KIND else f"{kind.noun} "
    role = "" if key.role == DEFAULT_ROLE else f" role {printable(key.role)}"
    session = ""
    if kind is TRANSFER_ENGINE_INFO_KIND:
        tagged = not protocol.is_classic(record.value)
        session = f" backend {printable(str(record.value['backend']))}" if tagged else ""
        session += f" session {printable(record.session_id)}" if "session_id" in record.value else ""
    extra: dict[str, object] = {"rank": record.rank, "version": record.version, "namespace": key.namespace}
    if kind is TRANSFER_ENGINE_INFO_KIND:
        extra["session_id"] = record.session_id
    if kind is not TRANSFER_ENGINE_INFO_KIND or key.role != DEFAULT_ROLE:
        extra["kind"] = kind.name
        extra["role"] = key.role
    log.info(
        "%s %srank %d%s%s version %d%s",
        action,
        what,
        record.rank,
        role,
        session,
        record.version,
        where,
        extra=extra,
    )


async def list_ranks(request: web.Request) -> web.Response:
    """``GET /ranks[?kind=K][&role=R]``: one kind and role's records (transfer-engine info, target)."""
    kind = kind_named(_param(request, "kind"))
    role = protocol.parse_role_param(_param(request, "role"))
    namespace = namespace_of(request)
    registry = request.app[REGISTRY]
    store = registry.store
    body = records.encode_listing(
        await store.records(namespace, kind.name, role),
        await store.version(namespace),
        request.app[CONFIG].world_size,
        registry.parked_in(namespace),
        time.time(),
        kind=kind.name,
        role=role,
        summary=kind.summary,
    )
    return web.Response(body=body, content_type=protocol.JSON_TYPE)


# -- the encoder URL list -----------------------------------------------


async def _encoder_url(request: web.Request) -> str:
    return protocol.parse_url_body(await read_body(request, request.app[CONFIG]))


async def register_encoder_url(request: web.Request) -> web.Response:
    """``POST /register_encoder_url``: add a URL to the namespace's list (once)."""
    url = await _encoder_url(request)
    key = encoder_list_key(namespace_of(request))
    await request.app[REGISTRY].set_member(key, url, present=True)
    request.app[METRICS].count_registration(key.namespace, ENCODER_URLS)
    log.info("registered encoder URL %s", printable(url), extra={"namespace": key.namespace})
    return web.Response(text="OK")


async def unregister_encoder_url(request: web.Request) -> web.Response:
    """``DELETE /unregister_encoder_url``: remove a URL from the list; ``OK`` also when it was not there."""
    url = await _encoder_url(request)
    key = encoder_list_key(namespace_of(request))
    await request.app[REGISTRY].set_member(key, url, present=False)
    log.info("unregistered encoder URL %s", printable(url), extra={"namespace": key.namespace})
    return web.Response(text="OK")


@counts_gets
async def list_encoder_urls(request: web.Request) -> web.StreamResponse:
    """``GET /list_encoder_urls[?after=V][&wait=S]``: the list, once it changed after version V."""
    wait = _wait_seconds(request)
    after = protocol.parse_after(_param(request, "after"))
    key = encoder_list_key(namespace_of(request))
    registry = request.app[REGISTRY]
    since = time.time()
    record = await registry.wait(key, wait, after)
    request.app[METRICS].count_get(
        since, [] if record is None else [record], expired=record is None and wait > 0
    )
    if record is None:
        # Unchanged when the wait ran out: the list as it is, with its version.
        record = await registry.get(key)
    if record is None:
        return await json_reply(request, protocol.encode_encoder_urls([], 0), version=0)
    return await json_reply(request, registry.reply(record), version=record.version)
