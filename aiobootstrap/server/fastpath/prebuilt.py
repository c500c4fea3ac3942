"""What every pre-built reply shares: the stamp, the headers an access log reads, the response aiohttp reads, and the reply written early.

aiohttp answers a ``web.Response`` by filling a header multidict, sending
``on_response_prepare``, serialising the headers and writing them with the
body: a few tens of µs, more than the rest of a keepalive's whole handling.
A reply whose head is one of a few (``heads``) and whose body is a few bytes
can skip all of it when the app's ``eligible.Eligibility`` allows it. Four
things are written once here for every such reply (a get, a registration's
``OK``, a woken get, a watch's long-poll, a keepalive, a stop's ``503``):

- :class:`Stamp`: the stamp lines (``Date``, ``Server``, the boot id), made
  once a second, or at once on a new boot id; the app has one, which the gets
  (``gets.GetReplies.stamp``) and the watches share;
- :func:`reply_headers`: the headers the bytes carry, as a multidict, for
  whoever reads a reply's ``headers`` after it is sent (an access log's
  format): every pre-built reply shows the same fields aiohttp's would;
- :class:`BytesReply`: what aiohttp's request handler reads of a reply it did
  not write (``keep_alive``, ``body_length``, ``status``, ``headers``); the
  gets' ``GetReply`` and :class:`PrebuiltReply` (a keepalive's bytes, or a
  watch's written already) are its two kinds;
- :class:`PendingReply`: a reply a change may write before its handler
  resumes, once at most and never once settled, and the bytes it sent; the
  gets' ``PendingGet`` and the watches' ``PendingWatch`` are its two kinds.
"""

from __future__ import annotations

import abc
import email.utils
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import SERVER_SOFTWARE
from multidict import CIMultiDict

from ..._names import BOOT_HEADER, VERSION_HEADER
from ...wire.routes import JSON_TYPE
from . import heads
from .writes import write

__all__ = ["BytesReply", "PendingReply", "PrebuiltReply", "Stamp", "TextHeads", "reply_headers"]


class Stamp:
    """The stamp lines of a reply (``Date``, ``Server``, the boot id), made once a second, or on a new boot id.

    ``boot`` reads the boot id (the store's incarnation, which a flushed Redis
    changes). A new second or boot id makes a new ``bytes`` object: a cache of
    whole replies is stale when :meth:`lines` is not the object it was made with.
    """

    __slots__ = ("_boot", "_lines", "boot_id", "second")

    def __init__(self, boot: Callable[[], str]) -> None:
        self._boot = boot
        self.second = -1
        """The second of the lines last made."""
        self.boot_id = ""
        """The boot id of the lines last made."""
        self._lines = b""

    def lines(self) -> bytes:
        second, boot = int(time.time()), self._boot()
        if second != self.second or boot != self.boot_id:
            self.second, self.boot_id = second, boot
            self._lines = heads.stamp_lines(second, boot)
        return self._lines


class TextHeads:
    """A text ``200``'s bytes (Mooncake's ``metadata updated``), made from its bytes around its version's
    digits, the only part that moves from one reply to the next, kept per text and variant for one stamp."""

    __slots__ = ("_parts", "_stamp")

    def __init__(self) -> None:
        self._parts: dict[tuple[bytes, int, bool], tuple[bytes, bytes]] = {}
        self._stamp = b""

    def reply(self, stamp: bytes, text: bytes, variant: int, version: int | None) -> bytes:
        if stamp is not self._stamp:
            self._parts.clear()
            self._stamp = stamp
        parts = self._parts.get((text, variant, version is None))
        if parts is None:
            if version is None:
                whole = heads.head(heads.OK, heads.TEXT_LINE, len(text), stamp, variant)
                parts = (whole if variant & heads.HEAD else whole + text, b"")
            else:
                # The head made as for any version, the digits' place marked (no stamp line holds a NUL).
                fields = heads.TEXT_LINE + VERSION_HEADER.encode() + b": \0\r\n"
                before, _, after = heads.head(heads.OK, fields, len(text), stamp, variant).partition(b"\0")
                parts = (before, after if variant & heads.HEAD else after + text)
            if len(self._parts) < _MOST_TEXTS:
                self._parts[(text, variant, version is None)] = parts
        before, after = parts
        return before if version is None else b"%s%d%s" % (before, version, after)


_MOST_TEXTS = 256
"""The most texts and variants a :class:`TextHeads` keeps for one stamp."""


def reply_headers(
    stamp: Stamp, variant: int, content_type: str, length: int, version: int | None = None
) -> CIMultiDict[str]:
    """The headers a pre-built reply's bytes carry (its stamp's last lines), in the order aiohttp writes them."""
    headers = CIMultiDict({"Content-Type": content_type})
    if version is not None:
        headers[VERSION_HEADER] = str(version)
    headers["Content-Length"] = str(length)
    headers["Date"] = email.utils.formatdate(stamp.second, usegmt=True)
    headers["Server"] = SERVER_SOFTWARE
    headers[BOOT_HEADER] = stamp.boot_id
    connection = heads.connection_line(variant)
    if connection:
        headers["Connection"] = connection.decode().partition(": ")[2].strip()
    return headers


class BytesReply(web.StreamResponse, abc.ABC):
    """A ``200`` that writes its own bytes below aiohttp's writer (``sent``: they were written already).

    What aiohttp's request handler reads from a response after ``prepare`` and
    ``write_eof`` (``keep_alive``, ``body_length``, ``status``), kept as for
    any response, and its ``headers`` (:func:`reply_headers`, of what
    :meth:`fields` says), filled when first read; a subclass's ``prepare``
    writes the bytes.
    """

    def __init__(
        self, request: web.BaseRequest, stamp: Stamp, *, sent: int | None = None, variant: int | None = None
    ) -> None:
        """``variant``: the request's (``heads.variant``), when its maker has it already."""
        super().__init__(status=200)
        self._stamp = stamp
        self._variant = heads.variant(request) if variant is None else variant
        self._closing = bool(self._variant & heads.CLOSE)
        self._length = 0 if sent is None else sent
        self._sent = sent is not None
        self._headers_filled = False

    @abc.abstractmethod
    def fields(self) -> tuple[str, int, int | None]:
        """The reply's content type, body length and ``X-Aiobootstrap-Version`` (``None``: none)."""

    @property
    def headers(self) -> CIMultiDict[str]:
        headers = super().headers
        if not self._headers_filled:
            self._headers_filled = True
            headers.update(reply_headers(self._stamp, self._variant, *self.fields()))
        return headers

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

    async def write_eof(self, data: bytes = b"") -> None:
        pass


class PrebuiltReply(BytesReply):
    """A ``200`` whose ``data`` (head and a body of ``length`` bytes) ``prepare`` writes; with ``sent``,
    bytes written already. JSON unless ``content_type`` says otherwise; ``version``: the
    ``X-Aiobootstrap-Version`` its head carries, if any."""

    def __init__(
        self,
        request: web.BaseRequest,
        stamp: Stamp,
        data: bytes,
        length: int,
        *,
        sent: int | None = None,
        content_type: str = JSON_TYPE,
        version: int | None = None,
        variant: int | None = None,
    ) -> None:
        super().__init__(request, stamp, sent=sent, variant=variant)
        self._data = data
        self._body_length = length
        self._reply_type = content_type
        self._version = version

    def fields(self) -> tuple[str, int, int | None]:
        return self._reply_type, self._body_length, self._version

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        if not self._sent:
            self._sent = True
            if not write(request, self._data):
                raise ConnectionResetError("The client closed the connection before its reply.")
            self._length = len(self._data)
        await request.writer.drain()
        return None


class PendingReply:
    """A reply that a change may write before its handler resumes: once at most, and nothing once settled.

    Its kinds (``PendingGet``, ``PendingWatch``) keep these attributes in their
    own ``__slots__``: a watch's is the history's ``WaitEnd`` too, and of two
    bases only one may lay slots out: this one has none (mypy, which would
    then refuse the attributes below, is not shown the empty ``__slots__``).
    Each sets them in its ``__init__`` (``request``; ``settled`` false,
    ``sent`` 0, ``length`` -1): one call less per parked request.
    """

    if not TYPE_CHECKING:
        __slots__ = ()

    request: web.Request
    settled: bool
    """The handler's wait is over: nothing more is written for it."""
    sent: int
    """Bytes written; 0 until then, or when the client had gone."""
    length: int
    """The written reply's body length (its ``Content-Length``); -1 until written."""

    @property
    def written(self) -> bool:
        return self.length >= 0

    def write_once(self, data: bytes, length: int) -> bool:
        """Send ``data``, a reply of a ``length``-byte body, unless settled or written already.

        Returns whether this was its write (``sent`` stays 0 when the client had gone).
        """
        if self.settled or self.length >= 0:
            return False
        self.length = length
        if write(self.request, data):
            self.sent = len(data)
        return True
