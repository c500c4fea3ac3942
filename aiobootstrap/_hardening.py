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
from collections.abc import Collection
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler, Middleware

from . import _protocol as protocol
from ._config import ServerConfig
from .exceptions import BootstrapError, PayloadTooLarge

__all__ = [
    "BOOT_ID",
    "auth_middleware",
    "boot_header",
    "new_boot_id",
    "read_body",
    "runner_options",
    "ssl_context",
]

BOOT_ID = web.AppKey("boot_id", str)


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


def _unauthorized(detail: str) -> web.Response:
    return web.Response(
        status=401,
        body=protocol.error_body(detail),
        content_type=protocol.JSON_TYPE,
        headers={"WWW-Authenticate": 'Bearer realm="aiobootstrap"'},
    )


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


def auth_middleware(token: str, public: Collection[Handler]) -> Middleware:
    """Refuse, before the handler reads anything, a request without the bearer ``token``.

    Handlers in ``public`` (``/health``) answer anyone.
    """
    expected = token.encode("ascii")

    @web.middleware
    async def require_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.match_info.handler in public:
            return await handler(request)
        header = request.headers.get("Authorization")
        if header is None:
            return _unauthorized("This server requires an Authorization: Bearer token.")
        if not bearer_matches(header, expected):
            return _unauthorized("The bearer token is not valid for this server.")
        return await handler(request)

    return require_token


# -- bodies -------------------------------------------------------------


async def read_body(request: web.Request, config: ServerConfig) -> bytes:
    """The request body, refused early when it announces more than the limit, and read in bounded time."""
    declared = request.content_length
    if declared is not None and declared > config.max_body_size:
        raise PayloadTooLarge(too_large_detail(config.max_body_size))
    try:
        async with asyncio.timeout(config.body_timeout):
            return await request.read()
    except TimeoutError:
        raise RequestTimeout(
            f"The request body did not arrive within {config.body_timeout:g} seconds."
        ) from None
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(too_large_detail(config.max_body_size)) from None


def too_large_detail(limit: int) -> str:
    return f"The request body is larger than the server's limit of {limit} bytes."


# -- connections --------------------------------------------------------


class _OneLineParseErrors(logging.Filter):
    """aiohttp logs a client's malformed request (an oversized header, say) with a
    traceback at ERROR; it is the client's mistake, worth one WARNING line."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
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
