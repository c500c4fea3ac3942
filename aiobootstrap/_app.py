"""The HTTP layer: an aiohttp app that adapts requests to the registry.

It knows nothing of sockets or signals (see ``_server``): a test drives it
with ``aiohttp_client(create_app(config))``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from functools import partial

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from . import __version__
from . import _protocol as protocol
from ._config import ServerConfig
from ._hardening import (
    BOOT_ID,
    ExpectHandler,
    RequestTimeout,
    UnreadableBody,
    auth_middleware,
    boot_header,
    expect_handler,
    new_boot_id,
    read_body,
    too_large_detail,
)
from ._journal import Journal
from ._logging import printable
from ._metrics import METRICS, Metrics, counts_gets, metrics, metrics_middleware
from ._namespaces import Namespace, Namespaces
from ._openapi import openapi
from ._registry import MemoryStore, ParkingLot, Record, RecordStore, Registry
from .exceptions import BadRequest, BootstrapError, TooManyWaiters

__all__ = ["CONFIG", "NAMESPACES", "REGISTRY", "create_app"]

log = logging.getLogger("aiobootstrap")

CONFIG = web.AppKey("config", ServerConfig)
REGISTRY = web.AppKey("registry", Registry)
"""The default namespace's registry."""
NAMESPACES = web.AppKey("namespaces", Namespaces)


def create_app(config: ServerConfig | None = None) -> web.Application:
    """The aiobootstrap app for ``config`` (defaults when omitted)."""
    config = config if config is not None else ServerConfig()
    middlewares: list[Middleware] = [metrics_middleware, error_middleware]
    if config.auth_token is not None:
        # Inside the error middleware, before any handler: a refused request
        # has nothing read and nothing changed.
        middlewares.append(auth_middleware(config.auth_token, public=_PUBLIC))
    app = web.Application(middlewares=middlewares, client_max_size=config.max_body_size)
    app[CONFIG] = config
    app[BOOT_ID] = new_boot_id()
    app.on_response_prepare.append(boot_header)
    app.cleanup_ctx.append(_registry_context)
    app.on_shutdown.append(_release_waiters)
    # aiohttp answers Expect before any middleware: this one checks the token and size first.
    expect = expect_handler(config, public=_PUBLIC)
    routes = _routes(expect)
    app.router.add_routes(routes)
    app.router.add_routes(_namespaced(routes))
    # Server-wide routes: one server, one set of metrics, one API description.
    app.router.add_get(protocol.METRICS_PATH, metrics, expect_handler=expect)
    app.router.add_get(protocol.OPENAPI_PATH, openapi, expect_handler=expect)
    return app


def _routes(expect: ExpectHandler | None = None) -> list[web.RouteDef]:
    """The bootstrap routes: each is also served under ``/ns/{namespace}``."""
    return [
        web.get(protocol.HEALTH_PATH, health, expect_handler=expect),
        web.put(protocol.REGISTER_PATH, register, expect_handler=expect),
        web.delete(protocol.REGISTER_PATH, unregister, expect_handler=expect),
        web.get(protocol.GET_PATH, get_info, expect_handler=expect),
        web.get(protocol.BATCH_PATH, get_batch, expect_handler=expect),
        web.get(protocol.RANKS_PATH, list_ranks, expect_handler=expect),
    ]


def _namespaced(routes: Iterable[web.RouteDef]) -> list[web.RouteDef]:
    return [
        web.RouteDef(route.method, protocol.path(route.path, "{namespace}"), route.handler, route.kwargs)
        for route in routes
    ]


async def _registry_context(app: web.Application) -> AsyncIterator[None]:
    config = app[CONFIG]
    journal = None if config.state_file is None else await _open_journal(config.state_file)
    # One lot for every namespace: --max-waiters protects the server, not one deployment.
    lot = ParkingLot(config.max_waiters)
    # A world size already bounds the ranks; the cap guards servers without one.
    max_ranks = config.max_ranks if config.world_size is None else None
    new_registry = partial(
        _namespace_registry,
        lot,
        max_ranks,
        _memory_store if journal is None else journal.store,
    )
    registry = new_registry(protocol.DEFAULT_NAMESPACE, 0)
    app[REGISTRY] = registry
    namespaces = Namespaces(registry, new_registry, limit=config.max_namespaces)
    app[NAMESPACES] = namespaces
    app[METRICS] = Metrics(namespaces)
    yield
    namespaces.close()
    if journal is not None:
        await journal.close()


async def _open_journal(path: str) -> Journal:
    journal = await Journal.open(path, encode_reply=protocol.encode_info)
    log.info(
        "state file %s: loaded %d registration(s), version %d",
        journal.path,
        len(journal),
        journal.last_version,
    )
    return journal


def _memory_store(name: str, last_version: int) -> MemoryStore:
    return MemoryStore(last_version=last_version)


def _namespace_registry(
    lot: ParkingLot,
    max_ranks: int | None,
    new_store: Callable[[str, int], RecordStore],
    name: str,
    last_version: int,
) -> Registry:
    """A namespace's registry, its store made by ``new_store``, versions going on from ``last_version``."""
    return Registry(
        new_store(name, last_version), encode_reply=protocol.encode_info, lot=lot, max_ranks=max_ranks
    )


async def _release_waiters(app: web.Application) -> None:
    # Parked long-polls answer 503 now, instead of holding shutdown until they expire.
    app[NAMESPACES].close()


# -- errors -------------------------------------------------------------


def _json_error(status: int, detail: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=protocol.error_body(detail),
        content_type=protocol.JSON_TYPE,
        headers=headers,
    )


_HTTP_DETAILS = {
    404: "No such route; see the API reference for the routes this server answers.",
    405: "This route does not take that method.",
}


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every error into a JSON ``{"detail": ...}`` reply; never a traceback."""
    try:
        return await handler(request)
    except TooManyWaiters as exc:
        return _json_error(exc.status, exc.detail, {"Retry-After": f"{exc.retry_after:g}"})
    except BootstrapError as exc:
        response = _json_error(exc.status, exc.detail)
        if isinstance(exc, UnreadableBody | RequestTimeout):
            # The rest of the body may still be on its way: the connection cannot carry another request.
            response.force_close()
        return response
    except web.HTTPRequestEntityTooLarge:
        return _json_error(413, too_large_detail(request.app[CONFIG].max_body_size))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        detail = _HTTP_DETAILS.get(exc.status, exc.reason)
        return _json_error(exc.status, detail, {k: v for k, v in exc.headers.items() if k == "Allow"})
    except Exception:
        log.exception("Unexpected error answering %s %s", request.method, request.path)
        return _json_error(500, "The server failed to answer this request; see its log.")


# -- routes -------------------------------------------------------------


async def health(request: web.Request) -> web.Response:
    # The header tells a port-clash probe (see _portinfo) that an aiobootstrap server holds the port.
    return web.Response(text="OK", headers={protocol.HEALTH_HEADER: __version__})


_PUBLIC = frozenset({health})
"""Handlers that answer without the bearer token."""


def namespace_of(request: web.Request) -> Namespace:
    """The namespace a request addresses: its ``/ns/{namespace}`` prefix, or the default."""
    name = request.match_info.get("namespace", protocol.DEFAULT_NAMESPACE)
    return request.app[NAMESPACES].get(name)


def registry_of(request: web.Request) -> Registry:
    """The registry a request addresses."""
    return namespace_of(request).registry


_SEPARATE_BODY_OVER = 256 * 1024


async def json_reply(request: web.Request, body: bytes) -> web.StreamResponse:
    """A 200 JSON reply of ``body``, which may be shared by many replies at once."""
    if len(body) <= _SEPARATE_BODY_OVER:
        return web.Response(body=body, content_type=protocol.JSON_TYPE)
    # web.Response joins headers and body into one new bytes object (on Python
    # before 3.12.9): a private copy of a 20 MB reply per getter in flight.
    # Written apart, every getter sends the registration's one bytes object.
    response = web.StreamResponse(headers={"Content-Type": protocol.JSON_TYPE})
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


async def register(request: web.Request) -> web.Response:
    body = await read_body(request, request.app[CONFIG])
    registration = protocol.parse_registration(body)
    protocol.check_world_size(registration.rank, request.app[CONFIG].world_size)
    namespace = namespace_of(request)
    record = await namespace.registry.register(
        registration.rank, registration.session_id, registration.weights_info_dict
    )
    namespace.registrations += 1
    _log_change("registered", record, namespace.name)
    return web.Response(text="OK")


def _log_change(action: str, record: Record, namespace: str) -> None:
    """One line per registration or deletion, with structured fields for JSON logs."""
    where = "" if namespace == protocol.DEFAULT_NAMESPACE else f" in namespace {namespace}"
    log.info(
        "%s rank %d session %s version %d%s",
        action,
        record.rank,
        printable(record.session_id),
        record.version,
        where,
        extra={
            "rank": record.rank,
            "session_id": record.session_id,
            "version": record.version,
            "namespace": namespace,
        },
    )


async def unregister(request: web.Request) -> web.Response:
    rank = protocol.parse_rank_param(_param(request, "rank"))
    protocol.check_world_size(rank, request.app[CONFIG].world_size)
    namespace = namespace_of(request)
    record = await namespace.registry.unregister(rank)
    if record is None:
        return _not_registered([rank])
    _log_change("unregistered", record, namespace.name)
    return web.Response(text="OK")


@counts_gets
async def get_info(request: web.Request) -> web.StreamResponse:
    rank = protocol.parse_rank_param(_param(request, "rank"))
    wait = _wait_seconds(request)
    after = protocol.parse_after(_param(request, "after"))
    protocol.check_world_size(rank, request.app[CONFIG].world_size)
    registry = registry_of(request)
    since = registry.version
    record = await registry.wait(rank, wait, after)
    request.app[METRICS].count_get(since, [] if record is None else [record], expired=record is None)
    if record is None:
        return _not_registered([rank])
    return await json_reply(request, record.reply)


@counts_gets
async def get_batch(request: web.Request) -> web.StreamResponse:
    ranks = protocol.parse_ranks(_param(request, "ranks"))
    wait = _wait_seconds(request)
    after = protocol.parse_after(_param(request, "after"))
    world_size = request.app[CONFIG].world_size
    protocol.check_world_size(max(ranks), world_size)
    registry = registry_of(request)
    since = registry.version
    found, missing = await registry.wait_all(ranks, wait, after)
    request.app[METRICS].count_get(since, found, expired=bool(missing))
    if missing:
        return _not_registered(missing)
    return await json_reply(request, protocol.encode_batch(found, registry.version))


def _not_registered(missing: list[int]) -> web.Response:
    # Not raised: the 404 carries "missing", which tells the client a rank's 404 from a wrong URL's.
    return web.Response(
        status=404, body=protocol.encode_not_registered(missing), content_type=protocol.JSON_TYPE
    )


async def list_ranks(request: web.Request) -> web.Response:
    registry = registry_of(request)
    body = protocol.encode_listing(
        registry.records(), registry.version, request.app[CONFIG].world_size, registry.parked, time.time()
    )
    return web.Response(body=body, content_type=protocol.JSON_TYPE)
