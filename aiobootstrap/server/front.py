"""The app's one middleware around every handler: the slash redirect, the request timing, the error replies."""

from __future__ import annotations

import functools
import time

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from .errors import error_reply
from .metrics import observe_answer

__all__ = ["front_middleware"]


def front_middleware(unmatched: Middleware) -> Middleware:
    """The app's outermost middleware: ``unmatched`` (the slash redirect) for a request no route
    matched, then the request's timing (:func:`~.metrics.observe_answer`) around its error reply
    (:func:`~.errors.error_reply`: JSON ``{"detail": ...}``, never a traceback), in one frame.

    Each middleware costs aiohttp a wrapper and a coroutine per request, so the three that ran for
    every request are this one: the redirect is not timed, an error reply is, and a redirect a
    handler raises is timed and goes on to aiohttp.
    """

    @web.middleware
    async def front(request: web.Request, handler: Handler, *, routed: bool = False) -> web.StreamResponse:
        if not routed and request.match_info.http_exception is not None:
            return await unmatched(request, functools.partial(front, handler=handler, routed=True))
        started = time.perf_counter()
        try:
            response = await handler(request)
        except Exception as exc:
            try:
                response = error_reply(request, exc)
            except web.HTTPException as passed:
                observe_answer(request, passed.status, started)
                raise
        observe_answer(request, response.status, started)
        return response

    return front
