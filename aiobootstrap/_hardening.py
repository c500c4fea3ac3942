"""What keeps a server safe to put on a shared network.

Authentication, the boot id, body reading with limits, and the options that
aiohttp's own connection handling takes (request line and header sizes, the
idle timeout, TLS). ``_app`` wires the HTTP parts into the app, ``_server``
hands the connection parts to the runner and the site.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import ssl
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler, Middleware

from . import _protocol as protocol
from ._config import ServerConfig
from .exceptions import BadRequest, BootstrapError, PayloadTooLarge

__all__ = [
    "BOOT_ID",
    "ExpectHandler",
    "UnreadableBody",
    "auth_middleware",
    "boot_header",
    "expect_handler",
    "new_boot_id",
    "read_body",
    "runner_options",
    "ssl_context",
]

BOOT_ID = web.AppKey("boot_id", str)

ExpectHandler = Callable[[web.Request], Awaitable[web.StreamResponse | None]]


class UnreadableBody(BadRequest):
    """The body broke its own framing or encoding: the connection cannot carry another request."""


class UnsupportedEncoding(BootstrapError):
    """The body is compressed; registrations are small JSON and are sent plain (HTTP 415)."""

    status = 415


class RequestTimeout(BootstrapError):
    """The request body did not arrive in time (HTTP 408)."""

    status = 408


# -- restart awareness --------------------------------------------------


def new_boot_id() -> str:
    """A random id for one life of an app: a client seeing it change knows the server restarted."""
    return secrets.token_hex(8)


async def boot_header(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: stamp every reply, errors included, with the boot id."""
    response.headers[protocol.BOOT_HEADER] = request.app[BOOT_ID]


# -- authentication -----------------------------------------------------


def _json(status: int, detail: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=protocol.error_body(detail), content_type=protocol.JSON_TYPE, headers=headers
    )


def _unauthorized(detail: str) -> web.Response:
    return _json(401, detail, {"WWW-Authenticate": 'Bearer realm="aiobootstrap"'})


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
            return _json(417, "The only expectation this server meets is Expect: 100-continue.")
        refusal = _refusal(request, config.auth_token, public)
        if refusal is not None:
            return refusal
        limit = config.max_body_size
        if request.content_length is not None and request.content_length > limit:
            return _json(413, too_large_detail(limit))
        if request.version >= (1, 1):
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            # The interim reply is not the response: let aiohttp still send one.
            request.writer.output_size = 0
        return None

    return expect


# -- bodies -------------------------------------------------------------


async def read_body(request: web.Request, config: ServerConfig) -> bytes:
    """The request body, refused early when it announces more than the limit, and read in bounded time."""
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise UnsupportedEncoding("The request body must be sent uncompressed, without Content-Encoding.")
    declared = request.content_length
    if declared is not None and declared > config.max_body_size:
        raise PayloadTooLarge(too_large_detail(config.max_body_size))
    try:
        async with asyncio.timeout(config.body_timeout):
            return await request.read()
    except TimeoutError:
        raise RequestTimeout(
            f"The request body did not arrive within {config.body_timeout:g} "
            f"second{'' if config.body_timeout == 1 else 's'}."
        ) from None
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(too_large_detail(config.max_body_size)) from None
    except web.RequestPayloadError:
        raise UnreadableBody(
            "The request body could not be read: check its Content-Encoding and chunked framing."
        ) from None


def too_large_detail(limit: int) -> str:
    return f"The request body is larger than the server's limit of {limit} bytes."


# -- connections --------------------------------------------------------


class _OneLineParseErrors(logging.Filter):
    """aiohttp logs a client's malformed request (an oversized header, say) with a
    traceback at ERROR; it is the client's mistake, worth one WARNING line."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, web.RequestPayloadError):  # a body aiohttp could not decode
            error = error.__cause__
        if isinstance(error, HttpProcessingError):
            said = record.getMessage()
            record.msg, record.args = "%s: %d %s", (said, error.code, error.message.strip())
            record.exc_info = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _http_logger() -> logging.Logger:
    logger = logging.getLogger("aiobootstrap.http")
    if not any(isinstance(f, _OneLineParseErrors) for f in logger.filters):
        logger.addFilter(_OneLineParseErrors())
    return logger


def runner_options(config: ServerConfig) -> dict[str, Any]:
    """The ``web.AppRunner`` keywords that enforce the config's connection limits."""
    return {
        "logger": _http_logger(),
        "max_line_size": config.max_request_line,
        "max_field_size": config.max_header_size,
        # aiohttp closes a connection that waits this long for a complete
        # request head, at its start as between requests: this is the
        # guard against clients that connect and never send (slowloris).
        "keepalive_timeout": config.idle_timeout,
        # Bodies reach read_body as sent, which refuses compressed ones with a
        # JSON 415: no decompression bomb, and no decoder failing inside
        # aiohttp's parser with a plain-text 400.
        "auto_decompress": False,
    }


def ssl_context(config: ServerConfig) -> ssl.SSLContext | None:
    """The server's TLS context, or ``None`` to serve plain HTTP."""
    if config.tls_cert is None or config.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(config.tls_cert, config.tls_key)
    except OSError as exc:  # ssl.SSLError included
        raise BootstrapError(
            f"Cannot load the TLS certificate {config.tls_cert} with key {config.tls_key}: "
            f"{exc.strerror or exc}."
        ) from None
    return context
