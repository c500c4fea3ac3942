"""Who may talk to the server: the bearer token, checked before anything is read.

The token check runs twice over: as a middleware for every request, and in
the ``Expect: 100-continue`` handler, because aiohttp answers ``Expect``
before any middleware runs and its own handler would invite the body of a
request the token check is about to refuse.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Collection

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from . import _protocol as protocol
from ._body import too_large_detail
from ._config import ServerConfig

__all__ = ["ExpectHandler", "auth_middleware", "bearer_matches", "expect_handler", "json_error"]

ExpectHandler = Callable[[web.Request], Awaitable[web.StreamResponse | None]]


def json_error(status: int, detail: str, headers: dict[str, str] | None = None) -> web.Response:
    """An error reply: JSON ``{"detail": ...}`` with ``status``."""
    return web.Response(
        status=status, body=protocol.error_body(detail), content_type=protocol.JSON_TYPE, headers=headers
    )


def _unauthorized(detail: str) -> web.Response:
    return json_error(401, detail, {"WWW-Authenticate": 'Bearer realm="aiobootstrap"'})


def bearer_matches(header: str | None, token: bytes) -> bool:
    """Whether an ``Authorization`` header carries ``token``, compared in constant time."""
    if header is None:
        return False
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    # compare_digest on bytes: its time does not depend on where the first
    # difference is, so the token cannot be guessed byte by byte.
    # surrogatepass: header text the parser could not decode still encodes, never raises.
    given = credentials.strip().encode("utf-8", "surrogatepass")
    return hmac.compare_digest(given, token)


def _refusal(request: web.Request, token: str | None, public: Collection[Handler]) -> web.Response | None:
    """The 401 for a request without the right token, or ``None`` to let it through."""
    if token is None or request.match_info.handler in public:
        return None
    headers = request.headers.getall("Authorization", [])
    if not headers:
        return _unauthorized("This server requires an Authorization: Bearer token.")
    if len(headers) > 1:
        # Which one a proxy or a framework would pick differs: refuse rather than guess.
        return _unauthorized("Send exactly one Authorization header.")
    header = headers[0]
    if not bearer_matches(header, token.encode("ascii")):
        return _unauthorized("The bearer token is not valid for this server.")
    return None


def auth_middleware(token: str, public: Collection[Handler]) -> Middleware:
    """Refuse, before the handler reads anything, a request without the bearer ``token``.

    Handlers in ``public`` (``/health``) answer anyone.
    """

    @web.middleware
    async def require_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        refusal = _refusal(request, token, public)
        return refusal if refusal is not None else await handler(request)

    return require_token


def expect_handler(config: ServerConfig, public: Collection[Handler]) -> ExpectHandler:
    """A route's ``Expect: 100-continue`` handling that refuses before inviting the body.

    aiohttp answers ``Expect`` before any middleware runs; its own handler
    invites the body of a request the token check is about to refuse, and
    answers an unknown expectation in plain text.
    """

    async def expect(request: web.Request) -> web.StreamResponse | None:
        if request.headers.get("Expect", "").strip().lower() != "100-continue":
            return json_error(417, "The only expectation this server meets is Expect: 100-continue.")
        refusal = _refusal(request, config.auth_token, public)
        if refusal is not None:
            return refusal
        limit = config.max_body_size
        if request.content_length is not None and request.content_length > limit:
            return json_error(413, too_large_detail(limit))
        if request.version >= (1, 1):
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            # The interim reply is not the response: let aiohttp still send one.
            request.writer.output_size = 0
        return None

    return expect
