"""The encoder URL list: add a URL, remove one, and get the list (once it changed after a version)."""

from __future__ import annotations

import time

from aiohttp import web

from ... import wire as protocol
from ..._names import ENCODER_URLS
from ..appkeys import CONFIG, REGISTRY
from ..body import read_body
from ..kinds import encoder_list_key
from ..metrics import METRICS, counts_gets
from ..replies import REPLY_WIRE
from .common import json_reply, namespace_of, param, wait_seconds
from .leases import lease_of_body
from .log_lines import log_encoder_url

__all__ = ["list_encoder_urls", "register_encoder_url", "unregister_encoder_url"]


async def _encoder_url(request: web.Request) -> str:
    return protocol.parse_url_body(await read_body(request, request.app[CONFIG]))


async def register_encoder_url(request: web.Request) -> web.Response:
    """``POST /register_encoder_url``: add a URL to the namespace's list (once), on a lease if it names one."""
    body = await read_body(request, request.app[CONFIG])
    url = protocol.parse_url_body(body)
    lease = lease_of_body(protocol.parse_body(body))
    key = encoder_list_key(namespace_of(request))
    await request.app[REGISTRY].set_member(key, url, present=True, lease=lease)
    request.app[METRICS].count_registration(key.namespace, ENCODER_URLS)
    log_encoder_url("registered", url, key.namespace)
    return web.Response(text="OK")


async def unregister_encoder_url(request: web.Request) -> web.Response:
    """``DELETE /unregister_encoder_url``: remove a URL from the list; ``OK`` also when it was not there."""
    url = await _encoder_url(request)
    key = encoder_list_key(namespace_of(request))
    await request.app[REGISTRY].set_member(key, url, present=False)
    log_encoder_url("unregistered", url, key.namespace)
    return web.Response(text="OK")


@counts_gets
async def list_encoder_urls(request: web.Request) -> web.StreamResponse:
    """``GET /list_encoder_urls[?after=V][&wait=S]``: the list, once it changed after version V."""
    wait = wait_seconds(request)
    after = protocol.parse_after(param(request, "after"))
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
