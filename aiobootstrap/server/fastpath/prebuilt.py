"""A reply whose bytes are made in full before aiohttp sees it: written by ``prepare`` in one ``transport.write``, or already.

aiohttp answers a ``web.Response`` by filling a header multidict, sending
``on_response_prepare``, serialising the headers and writing them with the
body: a few tens of µs, more than the rest of a keepalive's whole handling.
A reply whose head is one of a few (``heads``) and whose body is a few bytes
can skip all of it, when the app's ``on_response_prepare`` holds nothing but
the boot-id stamp (``GET_REPLIES.enabled``), which :class:`Stamp` puts in the
bytes. The watches' fast path (``watch_replies``) writes its bytes before its
handler resumes: its :class:`PrebuiltReply` then writes nothing. The gets'
``replies.GetReply`` is a :class:`BytesReply` too: what aiohttp reads of a
response once it is written is kept in one place.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from multidict import CIMultiDict

from . import heads
from .writes import write

__all__ = ["BytesReply", "PrebuiltReply", "Stamp"]


class Stamp:
    """The stamp lines of a reply (``Date``, ``Server``, the boot id), made once a second, or on a new boot id."""

    __slots__ = ("_boot", "_boot_id", "_lines", "_second")

    def __init__(self, boot: Callable[[], str]) -> None:
        self._boot = boot
        self._second = -1
        self._boot_id = ""
        self._lines = b""

    def lines(self) -> bytes:
        second, boot = int(time.time()), self._boot()
        if second != self._second or boot != self._boot_id:
            self._second, self._boot_id = second, boot
            self._lines = heads.stamp_lines(second, boot)
        return self._lines


class BytesReply(web.StreamResponse):
    """A ``200`` that writes its own bytes below aiohttp's writer (``sent``: they were written already).

    What aiohttp's request handler reads from a response after ``prepare`` and
    ``write_eof`` (``keep_alive``, ``body_length``, ``status``), kept as for
    any response; a subclass's ``prepare`` writes the bytes.
    """

    def __init__(self, request: web.BaseRequest, *, sent: int | None = None) -> None:
        super().__init__(status=200)
        self._variant = heads.variant(request)
        self._closing = bool(self._variant & heads.CLOSE)
        self._length = 0 if sent is None else sent
        self._sent = sent is not None

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
    """A ``200`` whose ``data`` (head and body) ``prepare`` writes; with ``sent``, bytes written already.

    Its ``headers`` (for an access log's format) name the content type only.
    """

    def __init__(self, request: web.BaseRequest, data: bytes = b"", *, sent: int | None = None) -> None:
        super().__init__(request, sent=sent)
        self._data = data
        self._headers_filled = False

    @property
    def headers(self) -> CIMultiDict[str]:
        headers = super().headers
        if not self._headers_filled:
            self._headers_filled = True
            headers["Content-Type"] = heads.JSON_LINE.decode().partition(": ")[2].strip()
        return headers

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        if not self._sent:
            self._sent = True
            if not write(request, self._data):
                raise ConnectionResetError("The client closed the connection before its reply.")
            self._length = len(self._data)
        await request.writer.drain()
        return None
