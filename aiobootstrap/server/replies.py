"""Replies written as bytes, below ``web.Response``: a get's ``200``, built once per registration and
written in one call, and the ``503`` a stop gives every parked wait.

Theory of operation
-------------------
aiohttp answers a handler's ``web.Response`` by filling a header multidict,
sending the ``on_response_prepare`` signal, serialising the headers and
writing them with the body: about 30 µs a reply, which a thousand waiters
woken by one registration used to pay one after another before the last of
them saw a byte. Yet a get's ``200`` differs from one getter to the next only
in what the request itself decides (HTTP/1.0 or 1.1, keep-alive or not,
``HEAD`` or ``GET``) and, once a second, in its ``Date``. So
:class:`ReplyWire` keeps, per record version, variant and second, the whole
reply as one ``bytes`` object (status line, headers with the boot id and the
record's version, body), and every getter of that record is sent that object
with one ``transport.write``.

Two ways out, one object each:

- A *woken* waiter's reply is written by the registry's delivery: the handler
  parks with an :class:`EarlyReply`, which the registry calls from one loop
  callback that writes every woken waiter's reply back to back, after the
  registration's own ``200`` and before the waiters' handler tasks resume.
  The k-th waiter's first byte then waits for k writes, not for k handler
  completions.
- Every other get (a hit, a wait answered at its deadline) returns a
  :class:`WireReply`, a ``web.StreamResponse`` whose ``prepare`` writes the
  bytes.

Either way the handler returns a :class:`WireReply` to aiohttp, so its
request handler treats the reply like any other: it logs the access (status,
bytes), keeps the connection or closes it as ``keep_alive`` says, and only
then reads the request pipelined behind. A client gone while parked is never
written to (its transport is closing). The bytes are the ones aiohttp would
send (``tests/test_replies.py`` compares them header by header); the fast way
is taken only when the app's ``on_response_prepare`` holds nothing but the
boot-id stamp, whose header it writes itself, and the app is not mounted
under another (whose hooks would run too).

Only public aiohttp API: the request's ``transport``, ``writer``
(``output_size`` and ``drain``), ``version``, ``keep_alive`` and ``method``,
and the ``StreamResponse`` members aiohttp's request handler calls.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import SERVER_SOFTWARE, HttpVersion10
from multidict import CIMultiDict

from .. import wire as protocol
from .._names import BOOT_HEADER, VERSION_HEADER
from ..exceptions import SHUTTING_DOWN_DETAIL

if TYPE_CHECKING:
    from ..store import Record

__all__ = ["REPLY_WIRE", "EarlyReply", "ReplyWire", "WireReply", "shutting_down_reply"]

SEPARATE_BODY_OVER = 256 * 1024
"""Bodies larger than this are written apart from their head, never copied per reply or second."""

_HEAD = 1
_CLOSE = 2
_HTTP10 = 4
_MAX_CACHED = 256


def _stamp_lines(second: int, boot: str) -> bytes:
    """The header lines every reply of that second carries: ``Date``, ``Server`` and the boot id."""
    date = email.utils.formatdate(second, usegmt=True)
    return f"Date: {date}\r\nServer: {SERVER_SOFTWARE}\r\n{BOOT_HEADER}: {boot}\r\n".encode()


def _variant(request: web.BaseRequest) -> int:
    """What of the reply the request decides: HEAD, keep-alive, HTTP/1.0."""
    variant = _HEAD if request.method == "HEAD" else 0
    if not request.keep_alive:
        variant |= _CLOSE
    if request.version == HttpVersion10:
        variant |= _HTTP10
    return variant


def _connection(variant: int) -> bytes:
    # What aiohttp's StreamResponse writes: HTTP/1.1 says close, HTTP/1.0 says keep-alive.
    if variant & _HTTP10:
        return b"" if variant & _CLOSE else b"Connection: keep-alive\r\n"
    return b"Connection: close\r\n" if variant & _CLOSE else b""


class ReplyWire:
    """The wire bytes of gets' ``200`` replies, cached per record version, variant and second.

    ``reply`` is the registry's encoded reply of a record (itself cached per
    version); ``boot`` reads the boot id (the store's incarnation, which a
    flushed Redis changes).
    """

    def __init__(self, reply: Callable[[Record], bytes], boot: Callable[[], str], *, enabled: bool) -> None:
        self.reply = reply
        self._boot = boot
        self.enabled = enabled
        """Whether replies may skip ``on_response_prepare`` (it holds only the boot-id stamp)."""
        self._second = -1
        self._stamp = b""
        self._boot_id = ""
        # id(body) << 3 | variant -> (body, head, whole): the body is held, so its id is not reused.
        self._cache: dict[int, tuple[bytes, bytes, bytes | None]] = {}
        self._last: tuple[Record | None, int, bytes, bytes | None] = (None, -1, b"", None)
        """The last record and variant asked for, and their parts: what a wake-up asks for a thousand times."""

    def parts(self, record: Record, variant: int) -> tuple[bytes, bytes | None]:
        """The reply's head and body, or its whole bytes and ``None`` (small bodies: one object)."""
        second = int(time.time())
        boot = self._boot()
        if second != self._second or boot != self._boot_id or len(self._cache) >= _MAX_CACHED:
            self._renew(second, boot)
        last = self._last
        if last[0] is record and last[1] == variant:
            return last[2], last[3]
        body = self.reply(record)
        cached = self._cache.get(id(body) << 3 | variant)
        if cached is not None and cached[0] is body:
            self._last = (record, variant, cached[1], cached[2])
            return cached[1], cached[2]
        head = self._head(record.version, len(body), variant)
        entry: tuple[bytes, bytes, bytes | None]
        if variant & _HEAD:
            entry = (body, head, None)
        elif len(body) > SEPARATE_BODY_OVER:
            entry = (body, head, body)
        else:
            entry = (body, head + body, None)
        self._cache[id(body) << 3 | variant] = entry
        self._last = (record, variant, entry[1], entry[2])
        return entry[1], entry[2]

    def ok(self, variant: int) -> bytes:
        """The whole ``200`` text ``OK`` of a registration (or a deletion)."""
        second = int(time.time())
        boot = self._boot()
        if second != self._second or boot != self._boot_id or len(self._cache) >= _MAX_CACHED:
            self._renew(second, boot)
        cached = self._cache.get(variant)  # no body's id is below 8: the keys do not collide
        if cached is not None:
            return cached[1]
        head = self._head(None, 2, variant)
        data = head if variant & _HEAD else head + b"OK"
        self._cache[variant] = (b"OK", data, None)
        return data

    def _renew(self, second: int, boot: str) -> None:
        self._cache.clear()
        self._last = (None, -1, b"", None)
        self._second = second
        self._boot_id = boot
        self._stamp = _stamp_lines(second, boot)

    def _head(self, version: int | None, length: int, variant: int) -> bytes:
        """A 200's head: JSON with the record's ``version``, or (``None``) aiohttp's ``text="OK"``."""
        status = b"HTTP/1.0 200 OK\r\n" if variant & _HTTP10 else b"HTTP/1.1 200 OK\r\n"
        if version is None:
            kind = b"Content-Type: text/plain; charset=utf-8\r\n"
        else:
            kind = f"Content-Type: application/json\r\n{VERSION_HEADER}: {version}\r\n".encode()
        return b"".join(
            (
                status,
                kind,
                f"Content-Length: {length}\r\n".encode(),
                self._stamp,
                _connection(variant),
                b"\r\n",
            )
        )

    def headers(self, record: Record | None, variant: int) -> CIMultiDict[str]:
        """The headers the bytes carry, for whoever reads a reply's ``headers`` (an access log format)."""
        if record is None:
            headers = CIMultiDict({"Content-Type": "text/plain; charset=utf-8", "Content-Length": "2"})
        else:
            headers = CIMultiDict(
                {
                    "Content-Type": protocol.JSON_TYPE,
                    VERSION_HEADER: str(record.version),
                    "Content-Length": str(len(self.reply(record))),
                }
            )
        headers["Date"] = email.utils.formatdate(self._second, usegmt=True)
        headers["Server"] = SERVER_SOFTWARE
        headers[BOOT_HEADER] = self._boot_id
        connection = _connection(variant)
        if connection:
            headers["Connection"] = connection.decode().partition(": ")[2].strip()
        return headers


def _write(request: web.BaseRequest, data: bytes) -> bool:
    """Write ``data`` on the request's connection, counted as aiohttp counts; ``False`` if it is gone."""
    transport = request.transport
    if transport is None or transport.is_closing():
        return False
    transport.write(data)
    writer = request.writer
    writer.output_size += len(data)
    return True


class EarlyReply:
    """A parked get's reply, written by the registry's delivery before the handler resumes.

    The registry calls it with the record (see ``Registry.wait``); it writes
    once. ``record`` is then the record sent, whatever the wait goes on to return.
    """

    __slots__ = ("record", "request", "sent", "wire")

    def __init__(self, request: web.Request, wire: ReplyWire) -> None:
        self.request = request
        self.wire = wire
        self.record: Record | None = None
        self.sent = 0
        """Bytes written; 0 until then, or when the client had gone."""

    def __call__(self, record: Record) -> None:
        if self.record is not None:
            return
        # The variant is read now, not while parking: its first reading fills the
        # request's cache of properties, 200 bytes per parked waiter otherwise.
        data, body = self.wire.parts(record, _variant(self.request))
        if body is not None:
            return  # a large body waits for its handler, which writes it with flow control
        self.record = record
        if _write(self.request, data):
            self.sent = len(data)


class WireReply(web.StreamResponse):
    """A ``200`` to return from a handler: its bytes are pre-built, written by ``prepare``.

    A get's reply of ``record``, or with ``None`` a registration's text ``OK``.
    When an :class:`EarlyReply` already wrote them, ``prepare`` writes nothing.
    aiohttp's request handler reads ``keep_alive``, ``body_length`` and
    ``status`` from it after ``prepare`` and ``write_eof``, as from any response.
    """

    def __init__(
        self, request: web.Request, wire: ReplyWire, record: Record | None, early: EarlyReply | None = None
    ) -> None:
        super().__init__(status=200)
        self._record = record
        self._wire = wire
        self._variant = _variant(request)
        self._sent = early is not None and early.record is not None
        self._length = early.sent if early is not None and self._sent else 0
        self._closing = bool(self._variant & _CLOSE)
        self._headers_filled = False

    @property
    def prepared(self) -> bool:
        return self._sent

    @property
    def keep_alive(self) -> bool:
        return not self._closing

    def force_close(self) -> None:
        self._closing = True

    @property
    def body_length(self) -> int:
        return self._length

    @property
    def headers(self) -> CIMultiDict[str]:
        if not self._headers_filled:
            self._headers_filled = True
            headers = super().headers
            headers.update(self._wire.headers(self._record, self._variant))
            return headers
        return super().headers

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        if self._sent:
            return None
        self._sent = True
        if self._record is None:
            data, body = self._wire.ok(self._variant), None
        else:
            data, body = self._wire.parts(self._record, self._variant)
        if not _write(request, data):
            raise ConnectionResetError("The client closed the connection before its reply.")
        self._length = len(data)
        if body:
            await request.writer.drain()
            if not _write(request, body):
                raise ConnectionResetError("The client closed the connection during its reply.")
            self._length += len(body)
        await request.writer.drain()
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        pass


def shutting_down_reply(boot: str) -> Callable[[web.BaseRequest], bytes]:
    """The ``503`` a parked wait gets at a stop, as bytes for one write, by the request's HTTP version and method.

    The very reply the error middleware would make of :class:`ShuttingDown`
    (same headers, the boot id included), with ``Connection: close``: the
    connection is closed after it.
    """
    body = protocol.error_body(SHUTTING_DOWN_DETAIL)
    content = f"Content-Type: {protocol.JSON_TYPE}\r\nContent-Length: {len(body)}\r\n".encode()
    fields = content + _stamp_lines(int(time.time()), boot)
    # HTTP/1.0 closes unless told otherwise; HTTP/1.1 is told.
    heads = {
        False: b"HTTP/1.1 503 Service Unavailable\r\n" + fields + b"Connection: close\r\n\r\n",
        True: b"HTTP/1.0 503 Service Unavailable\r\n" + fields + b"\r\n",
    }
    whole = {old: head + body for old, head in heads.items()}

    def reply(request: web.BaseRequest) -> bytes:
        old = request.version <= HttpVersion10
        return heads[old] if request.method == "HEAD" else whole[old]

    return reply


REPLY_WIRE = web.AppKey("reply_wire", ReplyWire)
"""Gets' 200 replies as pre-built bytes."""
