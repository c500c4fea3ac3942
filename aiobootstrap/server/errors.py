"""The server's one error reply: JSON ``{"detail": "<one clear sentence>"}`` with its status.

Every error the server answers goes through :func:`json_error`: the error
middleware's (for every error a handler raises) and the token and
``Expect`` checks' (``auth``, which answer before any handler runs). The
body is the wire's (``wire.errors``), the one writer of its shape.
"""

from __future__ import annotations

import logging

from aiohttp import web

from .._logging import RateLimited
from ..exceptions import (
    BodyBudgetExhausted,
    BootstrapError,
    PayloadTooLarge,
    RequestTimeout,
    StoreUnavailable,
    TooManyWaiters,
    UnreadableBody,
)
from ..wire.errors import error_body, error_fields
from ..wire.routes import JSON_TYPE
from .appkeys import CONFIG
from .body import too_large_detail

__all__ = [
    "STORE_REFUSALS",
    "error_reply",
    "json_error",
    "store_refusals",
]

log = logging.getLogger("aiobootstrap")

STORE_REFUSALS = web.AppKey("store_refusals", RateLimited)
"""The writes refused with ``503`` while the store is unavailable: one WARNING line per interval."""

_REFUSALS_INTERVAL = 10.0
"""Seconds between two lines counting the writes an outage of the store refused."""


def store_refusals() -> RateLimited:
    """What ``app`` keeps under :data:`STORE_REFUSALS`."""
    return RateLimited(log, _REFUSALS_INTERVAL)


def json_error(
    status: int, detail: str, headers: dict[str, str] | None = None, **extra: object
) -> web.Response:
    """An error reply: JSON ``{"detail": ...}`` with ``status`` (and ``headers``, such as ``Retry-After``;
    ``extra`` fields beside the detail, such as a lease ``404``'s ``lease``)."""
    body = error_body(detail, **extra)
    return web.Response(status=status, body=body, content_type=JSON_TYPE, headers=headers)


_HTTP_DETAILS = {
    404: "No such route; see the API reference for the routes this server answers.",
    405: "This route does not take that method.",
}


_BODY_LEFT_UNREAD = (UnreadableBody, RequestTimeout, PayloadTooLarge, BodyBudgetExhausted)
"""Errors answered before the body was read in full: the connection is closed after the reply."""


def error_reply(request: web.Request, exc: Exception) -> web.StreamResponse:
    """The JSON reply to what ``request``'s handler raised (called in its ``except``); an
    ``HTTPException`` below 400 (a redirect) is raised on to aiohttp."""
    if isinstance(exc, BootstrapError):
        headers = None
        if isinstance(exc, TooManyWaiters | StoreUnavailable | BodyBudgetExhausted):
            headers = {"Retry-After": f"{exc.retry_after:g}"}
        if isinstance(exc, StoreUnavailable) and request.method != "GET":
            # The first at once, the next ones counted into one line per interval.
            request.app[STORE_REFUSALS].log(
                logging.WARNING,
                "Refused a write (%s %s) with 503: %s",
                request.method,
                request.path,
                exc.detail,
            )
        extra = error_fields(exc)  # a lease 404's "lease", a 409's "code"
        response = json_error(exc.status, exc.detail, headers, **extra)
        if isinstance(exc, _BODY_LEFT_UNREAD):
            # The rest of the body may still be on its way: the connection cannot carry another request.
            response.force_close()
        return response
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        response = json_error(413, too_large_detail(request.app[CONFIG].max_body_size))
        response.force_close()
        return response
    if isinstance(exc, web.HTTPException):
        if exc.status < 400:
            raise exc
        detail = _HTTP_DETAILS.get(exc.status, exc.reason)
        return json_error(exc.status, detail, {k: v for k, v in exc.headers.items() if k == "Allow"})
    log.exception("Unexpected error answering %s %s", request.method, request.path)
    return json_error(500, "The server failed to answer this request; see its log.")
