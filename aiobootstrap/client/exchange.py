"""One request to one URL, and its reply read within bounds.

The only code that sees aiohttp's exceptions: a reply is a status and a body;
no reply at all (refused, reset, DNS, a read timeout) is :class:`Unreachable`.
The body is read as it arrives, up to a bound: a reply past it (a
``Content-Length`` that says so, a chunked or compressed body that grows past
it) is an :class:`UnexpectedReply`, and its connection is dropped with the
rest unread. How long the whole exchange may take is the caller's
(``transport`` bounds each try by the call's deadline).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Mapping
from typing import NamedTuple

import aiohttp

from .._names import BOOT_HEADER, VERSION_HEADER
from ..exceptions import BootstrapError, UnexpectedReply

__all__ = ["Reply", "Unreachable", "exchange"]

_CONNECT_TIMEOUT = 10.0

# aiohttp 3.10+ refuses a URL that is not http(s) with its own error, not an
# InvalidURL: without it here, such a URL would be retried as unreachable.
_BAD_URL: tuple[type[Exception], ...] = (
    aiohttp.InvalidURL,
    getattr(aiohttp, "NonHttpUrlClientError", aiohttp.InvalidURL),
)


class Reply(NamedTuple):
    """A reply: its status, its body, the version its ``X-Aiobootstrap-Version`` header names, and its boot id."""

    status: int
    body: bytes
    version: str | None
    boot: str | None = None


class Unreachable(Exception):
    """The server did not answer: not up yet, restarting, or the network failed."""


class _TooLarge(Exception):
    """A reply past its bound: read no further."""


async def exchange(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    path: str,
    *,
    params: Mapping[str, str] | None,
    body: bytes | None,
    headers: Mapping[str, str],
    ssl: ssl.SSLContext | bool,
    read_timeout: float,
    bound: int | None,
    saw_boot: Callable[[str | None], None],
) -> Reply:
    """Send one request to ``url`` + ``path``; its reply, of at most ``bound`` bytes.

    ``read_timeout`` is the longest wait for each read of the reply;
    ``saw_boot`` is told the boot id the reply names.
    """
    target = url + path
    try:
        async with session.request(
            method,
            target,
            params=params,
            data=body,
            headers=headers,
            ssl=ssl,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=_CONNECT_TIMEOUT, sock_read=read_timeout),
        ) as response:
            boot = response.headers.get(BOOT_HEADER)
            saw_boot(boot)
            try:
                payload = await _read(response, bound)
            except _TooLarge:
                response.close()  # read no further: drop the connection with the rest of the reply
                error = UnexpectedReply(
                    f"The reply from {target} is larger than the client's bound of {bound} bytes "
                    "(max_reply_size, per rank asked); it was not read further."
                )
                error.status = response.status
                raise error from None
            return Reply(response.status, payload, response.headers.get(VERSION_HEADER), boot)
    except _BAD_URL as exc:
        raise BootstrapError(f"Invalid server URL {url!r}.") from exc
    except aiohttp.ClientSSLError as exc:
        raise BootstrapError(f"TLS with {url} failed: {exc}") from exc
    except aiohttp.ClientConnectorError as exc:
        raise Unreachable(_refused(exc)) from exc
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise Unreachable(str(exc) or type(exc).__name__) from exc


def _refused(exc: aiohttp.ClientConnectorError) -> str:
    """What a failed connect says: the address and the system's reason, not aiohttp's ``ssl:default``.

    aiohttp names its TLS setting even for a plain ``http://`` URL, which
    reads as if TLS were the trouble.
    """
    errno = exc.os_error.errno
    # asyncio words a refused connect "Connect call failed (...)"; a failed name lookup's errno is negative.
    reason = (
        os.strerror(errno) if errno and errno > 0 else (exc.os_error.strerror or type(exc.os_error).__name__)
    )
    return f"cannot connect to {exc.host}:{exc.port}: {reason}"


async def _read(response: aiohttp.ClientResponse, bound: int | None) -> bytes:
    """``response``'s body, or :class:`_TooLarge` as soon as it is known to pass ``bound`` bytes.

    Read as it arrives rather than by ``read()``: a chunked reply has no length
    to check first, and a compressed one is bounded as aiohttp decodes it.
    """
    if bound is not None and (response.content_length or 0) > bound:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if bound is not None and size > bound:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)
