"""Reading a request body: refused early when it announces too much, read in bounded time."""

from __future__ import annotations

import asyncio

from aiohttp import web

from ._config import ServerConfig
from .exceptions import PayloadTooLarge, RequestTimeout, UnreadableBody, UnsupportedEncoding

__all__ = ["read_body", "too_large_detail"]


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
