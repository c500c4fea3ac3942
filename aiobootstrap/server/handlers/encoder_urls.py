"""The encoder URL list: add a URL, remove one, and get the list (once it changed after a version)."""

from __future__ import annotations

import time

from aiohttp import web

from ... import wire as protocol
from ..._names import ENCODER_URLS
from ..appkeys import CONFIG, REGISTRY
from ..body import read_body
from ..encoder_health import add_url, remove_url
from ..kinds import encoder_list_key
from ..metrics import METRICS, counts_gets
from ..replies import REPLY_WIRE
from .common import after_of, json_reply, namespace_of, wait_seconds
from .leases import lease_of_body
from .log_lines import log_encoder_url

__all__ = ["list_encoder_urls", "register_encoder_url", "unregister_encoder_url"]


async def _encoder_url(request: web.Request) -> str | None:
    return protocol.parse_url_body(await read_body(request, request.app[CONFIG]))


def _missing_url() -> web.Response:
    # The engines' callers may read "error" (their server's field); "detail" is every error's.
    body = protocol.error_body(protocol.MISSING_URL_DETAIL, error=protocol.MISSING_URL_ERROR)
    return web.Response(status=400, body=body, content_type=protocol.JSON_TYPE)


async def register_encoder_url(request: web.Request) -> web.Response:
    """``POST /register_encoder_url``: list a URL (once), less a trailing ``/``, on a lease if the body
    names one; an evicted URL is listed again at once."""
    # The url and the lease come from one parse of the body.
    payload = protocol.parse_body(await read_body(request, request.app[CONFIG]))
    url = protocol.encoder_url(payload.get("url"))
    if url is None:
        return _missing_url()
    lease = lease_of_body(payload)
    namespace = namespace_of(request)
    await add_url(request.app[REGISTRY], namespace, url, lease=lease)
    request.app[METRICS].count_registration(namespace, ENCODER_URLS)
    log_encoder_url("registered", url, namespace)
    return web.Response(text="OK")


async def unregister_encoder_url(request: web.Request) -> web.Response:
    """``DELETE /unregister_encoder_url``: unlist a URL and end its probing; ``OK`` also when it was not there."""
    url = await _encoder_url(request)
    if url is None:
        return _missing_url()
    namespace = namespace_of(request)
    await remove_url(request.app[REGISTRY], namespace, url)
    log_encoder_url("unregistered", url, namespace)
    return web.Response(text="OK")


@counts_gets
async def list_encoder_urls(request: web.Request) -> web.StreamResponse:
    """``GET /list_encoder_urls[?after=V][&wait=S]``: the list, once it changed after version V."""
    wait = wait_seconds(request)
    after = after_of(request)
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
    return await json_reply(request, request.app[REPLY_WIRE].body(record), version=record.version)
