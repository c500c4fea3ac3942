"""The encoder URL list: add a URL, remove one, and get the list (once it changed after a version)."""

from __future__ import annotations

import logging
import time

from aiohttp import web

from ...._json import dumps
from ...._logging import loggable
from ...._names import ENCODER_URLS
from ....store import members_of
from ....wire.bodies import MISSING_URL_DETAIL, MISSING_URL_ERROR, encoder_url, parse_body, parse_url_body
from ....wire.errors import error_body
from ....wire.leases import parse_lease_field
from ....wire.results import encode_encoder_urls
from ...appkeys import CONFIG, REGISTRY
from ...body import read_body
from ...fastpath.replies import JsonReply, RecordReply, Reply, TextReply
from ...metrics import METRICS, counts_gets
from ..common import after_of, namespace_of, wait_seconds
from .health import ENCODER_HEALTH, FAILURES_TO_EVICT, add_url, evicted_key, remove_url
from .keys import encoder_list_key
from .settings import EncoderSettings

__all__ = ["encoder_url_health", "list_encoder_urls", "register_encoder_url", "unregister_encoder_url"]

log = logging.getLogger("aiobootstrap")


def _log_url(action: str, url: str, namespace: str) -> None:
    """One line per encoder URL registered or unregistered, the URL clipped (structured fields for JSON logs)."""
    log.info("%s encoder URL %s", action, loggable(url), extra={"namespace": namespace})


async def _encoder_url(request: web.Request) -> str | None:
    return parse_url_body(await read_body(request, request.app[CONFIG]))


_OK = TextReply("OK")


def _missing_url() -> JsonReply:
    # The engines' callers may read "error" (their server's field); "detail" is every error's.
    return JsonReply(error_body(MISSING_URL_DETAIL, error=MISSING_URL_ERROR), 400)


async def register_encoder_url(request: web.Request) -> Reply:
    """``POST /register_encoder_url``: list a URL (once), less a trailing ``/``, on a lease if the body
    names one; an evicted URL is listed again at once."""
    # The url and the lease come from one parse of the body.
    payload = parse_body(await read_body(request, request.app[CONFIG]))
    url = encoder_url(payload.get("url"))
    if url is None:
        return _missing_url()
    lease = parse_lease_field(payload)
    namespace = namespace_of(request)
    await add_url(request.app[REGISTRY], namespace, url, lease=lease)
    request.app[METRICS].count_registration(namespace, ENCODER_URLS)
    _log_url("registered", url, namespace)
    return _OK


async def unregister_encoder_url(request: web.Request) -> Reply:
    """``DELETE /unregister_encoder_url``: unlist a URL and end its probing; ``OK`` also when it was not there."""
    url = await _encoder_url(request)
    if url is None:
        return _missing_url()
    namespace = namespace_of(request)
    await remove_url(request.app[REGISTRY], namespace, url)
    _log_url("unregistered", url, namespace)
    return _OK


@counts_gets
async def list_encoder_urls(request: web.Request) -> Reply:
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
        return JsonReply(encode_encoder_urls([], 0), version=0)
    return RecordReply(record)


async def encoder_url_health(request: web.Request) -> Reply:
    """``GET /encoder_url_health``: each listed and evicted URL with what this replica's probes found."""
    namespace = namespace_of(request)
    listed, evicted = await request.app[REGISTRY].get_many(
        [encoder_list_key(namespace), evicted_key(namespace)]
    )
    prober = request.app.get(ENCODER_HEALTH)
    urls: list[dict[str, object]] = []
    for url in members_of(None if listed is None else listed.value):
        failures = 0 if prober is None else prober.state_of(namespace, url)[0]
        if prober is None:
            state = "listed"
        elif failures:
            state = "failing"
        else:  # never probed is not healthy: the page showed a URL just listed as answering /health
            state = "healthy" if prober.probed(namespace, url) else "unprobed"
        urls.append({"url": url, "state": state, "failures": failures})
    shown = {each["url"] for each in urls}
    for url in members_of(None if evicted is None else evicted.value):
        if url in shown:
            continue  # between the two writes of an eviction or a revival: listed, as the prober treats it
        since = None if prober is None else prober.state_of(namespace, url)[1]
        urls.append(
            {"url": url, "state": "evicted", "evicted_for": None if since is None else round(since, 3)}
        )
    config = request.app[CONFIG].settings_of(EncoderSettings)
    body = {
        "version": 0 if listed is None else listed.version,
        "probing": prober is not None,
        "interval": config.encoder_health_interval,
        "failures_to_evict": FAILURES_TO_EVICT,
        # a watch's &findings= follows the next
        "findings": 0 if prober is None else prober.probe_changes.count,
        "encoder_urls": urls,
    }
    return JsonReply(dumps(body))
