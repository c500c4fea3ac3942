"""Where the token check runs: before anything is read, and before a body is invited.

The check itself is ``access``'s :class:`~.access.Guard`. It runs twice
over: as a middleware for every request, and in the ``Expect:
100-continue`` handler, because aiohttp answers ``Expect`` before any
middleware runs and its own handler would invite the body of a request the
token check is about to refuse.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from yarl import URL

from .access import Guard
from .aiohttp_internals import send_continue
from .body import too_large_detail
from .bringup_page import page_refusal
from .config import ServerConfig
from .errors import json_error
from .face import ExpectHandler

if TYPE_CHECKING:
    from .aiohttp_internals import InfoDict

__all__ = ["ExpectHandler", "UnroutedExpect", "auth_middleware", "expect_handler"]


def auth_middleware(guard: Guard) -> Middleware:
    """Refuse, before the handler reads anything, a request ``guard`` does not let through (401 or 403)."""

    @web.middleware
    async def require_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        refusal = guard.refusal(request)
        return await handler(request) if refusal is None else page_refusal(request, refusal)

    return require_token


def expect_handler(config: ServerConfig, guard: Guard | None) -> ExpectHandler:
    """A route's ``Expect: 100-continue`` handling that refuses before inviting the body.

    aiohttp answers ``Expect`` before any middleware runs; its own handler
    invites the body of a request the token check is about to refuse, and
    answers an unknown expectation in plain text.
    """

    async def expect(request: web.Request) -> web.StreamResponse | None:
        if request.headers.get("Expect", "").strip().lower() != "100-continue":
            return json_error(417, "The only expectation this server meets is Expect: 100-continue.")
        refusal = None if guard is None else guard.refusal(request)
        if refusal is not None:
            return refusal
        limit = config.max_body_size
        if request.content_length is not None and request.content_length > limit:
            return json_error(413, too_large_detail(limit))
        if request.version >= (1, 1):
            await send_continue(request)
        return None

    return expect


class _UnroutedRoute(web.AbstractRoute):
    """No route matched: answers the router's own 404 or 405, with an ``Expect`` handler of ours."""

    def __init__(self, error: web.HTTPException, expect: ExpectHandler) -> None:
        async def no_route(request: web.Request) -> web.StreamResponse:
            raise error

        super().__init__("*", no_route, expect_handler=expect)

    @property
    def name(self) -> str | None:
        return None

    def get_info(self) -> InfoDict:
        return {}

    def url_for(self, *args: str, **kwargs: str) -> URL:
        raise RuntimeError("an unrouted request has no URL to build")


class UnroutedExpect(web.AbstractResource):
    """Tried last, and only for a request with ``Expect`` that no route matched.

    aiohttp gives such a request its default ``Expect`` handler, which
    invites the body (``100 Continue``) before the token check refuses it and
    answers an unknown expectation in plain text. This resource gives it the
    app's answers instead: a JSON ``417``, the token's ``401``, or the JSON
    ``404``/``405``, each before any body is sent. It holds no route, so the
    route table (and the OpenAPI check of it) does not see it.
    """

    def __init__(self, router: web.UrlDispatcher, guard: Guard | None) -> None:
        super().__init__()
        self._router = router

        async def expect(request: web.Request) -> web.StreamResponse | None:
            if request.headers.get("Expect", "").strip().lower() != "100-continue":
                return json_error(417, "The only expectation this server meets is Expect: 100-continue.")
            # No 100 Continue: the handler refuses at once, the body never invited.
            return None if guard is None else guard.refusal(request)

        self._expect = expect

    @property
    def canonical(self) -> str:
        # Indexed under "/", the last place the router looks.
        return "/"

    def url_for(self, **kwargs: str) -> URL:
        raise RuntimeError("an unrouted request has no URL to build")

    async def resolve(self, request: web.Request) -> tuple[web.UrlMappingMatchInfo | None, set[str]]:
        if not request.headers.get("Expect"):
            return None, set()
        allowed: set[str] = set()
        for resource in self._router.resources():
            if resource is self:
                continue
            match, methods = await resource.resolve(request)
            if match is not None:  # a route matched after all: let the router give it
                return None, set()
            allowed |= methods
        error: web.HTTPException = (
            web.HTTPMethodNotAllowed(request.method, allowed) if allowed else web.HTTPNotFound()
        )
        return web.UrlMappingMatchInfo({}, _UnroutedRoute(error, self._expect)), set()

    def add_prefix(self, prefix: str) -> None:
        # Mounted as a sub-app: the sibling resources it defers to carry the prefix; it has no path of its own.
        pass

    def get_info(self) -> InfoDict:
        return {}

    def raw_match(self, path: str) -> bool:
        return False

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Iterator[web.AbstractRoute]:
        return iter(())
