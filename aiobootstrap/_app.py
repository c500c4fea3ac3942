"""The HTTP layer: an aiohttp app that adapts requests to the registry.

It knows nothing of sockets or signals (see ``_server``): a test drives it
with ``aiohttp_client(create_app(config))``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

from aiohttp import web
from aiohttp.typedefs import Handler

from . import _protocol as protocol
from ._config import ServerConfig
from ._registry import MemoryStore, Registry
from .exceptions import BadRequest, BootstrapError, NotRegistered, TooManyWaiters

__all__ = ["CONFIG", "REGISTRY", "create_app"]

log = logging.getLogger("aiobootstrap")

CONFIG = web.AppKey("config", ServerConfig)
REGISTRY = web.AppKey("registry", Registry)


def create_app(config: ServerConfig | None = None) -> web.Application:
    """The aiobootstrap app for ``config`` (defaults when omitted)."""
    config = config if config is not None else ServerConfig()
    app = web.Application(
        middlewares=[error_middleware],
        client_max_size=config.max_body_size,
    )
    app[CONFIG] = config
    app.cleanup_ctx.append(_registry_context)
    app.on_shutdown.append(_release_waiters)
    app.router.add_get(protocol.HEALTH_PATH, health)
    app.router.add_put(protocol.REGISTER_PATH, register)
    app.router.add_get(protocol.GET_PATH, get_info)
    app.router.add_get(protocol.BATCH_PATH, get_batch)
    app.router.add_get(protocol.RANKS_PATH, list_ranks)
    return app


async def _registry_context(app: web.Application) -> AsyncIterator[None]:
    store = MemoryStore()
    registry = Registry(
        store,
        encode_reply=protocol.encode_info,
        max_waiters=app[CONFIG].max_waiters,
    )
    app[REGISTRY] = registry
    yield
    registry.close()
    await store.close()


async def _release_waiters(app: web.Application) -> None:
    # Parked long-polls answer 503 now, instead of holding shutdown until they expire.
    app[REGISTRY].close()


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
        return _json_error(exc.status, exc.detail)
    except web.HTTPRequestEntityTooLarge:
        limit = request.app[CONFIG].max_body_size
        return _json_error(413, f"The request body is larger than the server's limit of {limit} bytes.")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        detail = _HTTP_DETAILS.get(exc.status, exc.reason)
        return _json_error(exc.status, detail, {k: v for k, v in exc.headers.items() if k == "Allow"})
    except Exception:
        log.exception("Unexpected error answering %s %s", request.method, request.path)
        return _json_error(500, "The server failed to answer this request; see its log.")


# -- routes -------------------------------------------------------------


def registry_of(request: web.Request) -> Registry:
    """The registry a request addresses."""
    return request.app[REGISTRY]


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


async def health(request: web.Request) -> web.Response:
    return web.Response(text="OK")


async def register(request: web.Request) -> web.Response:
    body = await request.read()
    registration = protocol.parse_registration(body)
    protocol.check_world_size(registration.rank, request.app[CONFIG].world_size)
    record = await registry_of(request).register(
        registration.rank, registration.session_id, registration.weights_info_dict
    )
    log.info("registered rank %d session %s version %d", record.rank, record.session_id, record.version)
    return web.Response(text="OK")


async def get_info(request: web.Request) -> web.StreamResponse:
    rank = protocol.parse_rank_param(_param(request, "rank"))
    wait = _wait_seconds(request)
    after = protocol.parse_after(_param(request, "after"))
    protocol.check_world_size(rank, request.app[CONFIG].world_size)
    record = await registry_of(request).wait(rank, wait, after)
    if record is None:
        raise NotRegistered(protocol.not_registered_detail(rank))
    return await json_reply(request, record.reply)


async def get_batch(request: web.Request) -> web.StreamResponse:
    ranks = protocol.parse_ranks(_param(request, "ranks"))
    wait = _wait_seconds(request)
    after = protocol.parse_after(_param(request, "after"))
    world_size = request.app[CONFIG].world_size
    protocol.check_world_size(max(ranks), world_size)
    registry = registry_of(request)
    found, missing = await registry.wait_all(ranks, wait, after)
    if missing:
        return web.Response(
            status=404,
            body=protocol.error_body(protocol.missing_ranks_detail(missing), missing=missing),
            content_type=protocol.JSON_TYPE,
        )
    return await json_reply(request, protocol.encode_batch(found, registry.version))


async def list_ranks(request: web.Request) -> web.Response:
    registry = registry_of(request)
    world_size = request.app[CONFIG].world_size
    now = time.time()
    records = registry.records()
    listing = {
        "version": registry.version,
        "world_size": world_size,
        "count": len(records),
        "ranks": [
            {
                "rank": record.rank,
                "session_id": record.session_id,
                "version": record.version,
                "registered_at": record.registered_at,
                "age": round(max(0.0, now - record.registered_at), 3),
            }
            for record in records
        ],
        "missing": (
            None if world_size is None else [rank for rank in range(world_size) if rank not in registry]
        ),
    }
    return web.Response(body=protocol.dumps(listing), content_type=protocol.JSON_TYPE)
