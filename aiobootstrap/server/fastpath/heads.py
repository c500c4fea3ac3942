"""A reply's head as aiohttp writes it, made as bytes: shared by the gets' (``gets``) and the watches' (``watches``) fast paths.

What of a head the request decides is its *variant* (HEAD, keep-alive,
HTTP/1.0); what changes once a second, or with the store's incarnation, is
its *stamp* (``Date``, ``Server``, the boot id). Both fast paths build the
same head from them, so one module holds the order aiohttp writes it in
(``tests/test_replies.py`` and ``tests/test_watch_replies.py`` compare it
header by header).
"""

from __future__ import annotations

import email.utils

from aiohttp import web
from aiohttp.http import SERVER_SOFTWARE, HttpVersion10

from ..._names import BOOT_HEADER
from ...wire.routes import JSON_TYPE

__all__ = [
    "CLOSE",
    "HEAD",
    "HTTP10",
    "JSON_LINE",
    "OK",
    "TEXT_LINE",
    "TEXT_TYPE",
    "connection_line",
    "head",
    "stamp_lines",
    "variant",
]

HEAD = 1
CLOSE = 2
HTTP10 = 4

OK = b"200 OK"
TEXT_TYPE = "text/plain; charset=utf-8"
"""What aiohttp's ``web.Response(text=...)`` says a text reply is."""
TEXT_LINE = f"Content-Type: {TEXT_TYPE}\r\n".encode()
JSON_LINE = f"Content-Type: {JSON_TYPE}\r\n".encode()


def stamp_lines(second: int, boot: str) -> bytes:
    """The header lines every reply of that second carries: ``Date``, ``Server`` and the boot id."""
    date = email.utils.formatdate(second, usegmt=True)
    return f"Date: {date}\r\nServer: {SERVER_SOFTWARE}\r\n{BOOT_HEADER}: {boot}\r\n".encode()


def variant(request: web.BaseRequest) -> int:
    """What of the reply the request decides: HEAD, keep-alive, HTTP/1.0."""
    found = HEAD if request.method == "HEAD" else 0
    if not request.keep_alive:
        found |= CLOSE
    if request.version == HttpVersion10:
        found |= HTTP10
    return found


def connection_line(variant: int) -> bytes:
    # What aiohttp's StreamResponse writes: HTTP/1.1 says close, HTTP/1.0 says keep-alive.
    if variant & HTTP10:
        return b"" if variant & CLOSE else b"Connection: keep-alive\r\n"
    return b"Connection: close\r\n" if variant & CLOSE else b""


def head(status: bytes, fields: bytes, length: int, stamp: bytes, variant: int) -> bytes:
    """A reply's head, as aiohttp orders it: status line, ``fields``, length, the stamp lines, connection."""
    version = b"HTTP/1.0 " if variant & HTTP10 else b"HTTP/1.1 "
    length_line = b"Content-Length: %d\r\n" % length
    return version + status + b"\r\n" + fields + length_line + stamp + connection_line(variant) + b"\r\n"
