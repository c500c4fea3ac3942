"""Reading a request body: refused early when it announces too much or a coding, read in bounded time and memory.

Every body being read counts against one budget for the whole server
(``max_body_memory``): a body announced by ``Content-Length`` is charged in
full before a byte of it is read, a chunked one as its chunks arrive. A
request that does not fit gets ``503`` with ``Retry-After`` and its connection
is closed, so a few stalled uploads cannot hold the memory of many.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import hdrs, web

from ..exceptions import (
    BodyBudgetExhausted,
    PayloadTooLarge,
    RequestTimeout,
    UnreadableBody,
    UnsupportedEncoding,
)
from .config import ServerConfig

__all__ = ["BODY_BUDGET", "BodyBudget", "read_body", "too_large_detail"]


class BodyBudget:
    """The bytes of request bodies being read now, against a limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> None:
        """Charge ``size`` bytes, or raise :class:`BodyBudgetExhausted` when they do not fit."""
        if self.used + size > self.limit:
            raise BodyBudgetExhausted(
                "The server is reading as many request bodies as its memory allows; retry shortly."
            )
        self.used += size

    def give(self, size: int) -> None:
        self.used -= size


BODY_BUDGET = web.AppKey("body_budget", BodyBudget)


async def read_body(request: web.Request, config: ServerConfig) -> bytes:
    """The request body, refused early when it announces more than the limit, read in bounded time and memory."""
    headers = request.headers
    chunked = hdrs.TRANSFER_ENCODING in headers  # chunked, or a coding refused here
    if chunked:
        _check_transfer_codings(request)
    encoding = headers.get(hdrs.CONTENT_ENCODING)
    if encoding is not None and encoding.strip().lower() not in ("", "identity"):
        raise UnsupportedEncoding("The request body must be sent uncompressed, without Content-Encoding.")
    declared = request.content_length
    limit = config.max_body_size
    if declared is not None and declared > limit:
        raise PayloadTooLarge(too_large_detail(limit))
    budget = request.app[BODY_BUDGET]
    charged = declared or 0
    content = request.content
    if not chunked and content.is_eof():
        # The common case: the whole body came with the head, framed by its Content-Length (which
        # aiohttp holds it to: no more than declared): one read, no timer. Its charge would be given
        # back before anything else runs, so only its check is made: refused when it does not fit.
        if budget.used + charged > budget.limit:
            budget.take(charged)  # raises BodyBudgetExhausted
        try:
            return content.read_nowait()
        except web.RequestPayloadError:
            raise UnreadableBody(_UNREADABLE) from None
    budget.take(charged)
    timer = contextlib.nullcontext() if content.is_eof() else asyncio.timeout(config.body_timeout)
    try:
        async with timer:
            chunks: list[bytes] = []
            size = 0
            async for chunk in content.iter_any():
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLarge(too_large_detail(limit))
                if size > charged:  # chunked: charged as it arrives
                    budget.take(size - charged)
                    charged = size
                chunks.append(chunk)
            return b"".join(chunks)
    except TimeoutError:
        raise RequestTimeout(
            f"The request body did not arrive within {config.body_timeout:g} "
            f"second{'' if config.body_timeout == 1 else 's'}."
        ) from None
    except web.RequestPayloadError:
        raise UnreadableBody(_UNREADABLE) from None
    finally:
        budget.give(charged)


_UNREADABLE = "The request body could not be read: check its Content-Encoding and chunked framing."


_FRAMING_ONLY = frozenset({"chunked", "identity"})
"""The transfer codings a body may be sent with: framing, no transformation of the bytes."""


def _check_transfer_codings(request: web.Request) -> None:
    """Refuse a body whose ``Transfer-Encoding`` names a coding beside ``chunked`` (``gzip, chunked``).

    aiohttp frames such a body by its last coding, chunked, and hands on the
    rest undecoded, while it refuses a ``Transfer-Encoding`` that does not end
    in ``chunked`` with a ``400`` before the body. A body is read here as sent,
    never decoded (as with ``Content-Encoding``): the same ``400``, as JSON, before
    a byte of the body is read.
    """
    codings = ",".join(request.headers.getall("Transfer-Encoding", ())).lower().split(",")
    if any(coding.strip() not in _FRAMING_ONLY for coding in codings if coding.strip()):
        # Unread, the body is still on its way: the connection is closed after the reply.
        raise UnreadableBody(
            "The request body's Transfer-Encoding names a coding other than chunked, which the server "
            "does not decode: send the body uncompressed, with Content-Length or chunked alone."
        )


def too_large_detail(limit: int) -> str:
    return f"The request body is larger than the server's limit of {limit} bytes."
