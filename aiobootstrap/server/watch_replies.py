"""The watches' fast path: a change's reply encoded once per crowd of watchers, written below ``web.Response``.

Theory of operation
-------------------
A thousand watchers of a namespace, told of one registration, each resumed
their task, filtered the history, encoded the same reply and answered it
through a ``web.Response`` of their own: the k-th first byte waited for k of
those. Yet what a watcher is told depends only on its filter and its
``after``, and most watchers share both.

So a watch parked on the history announces itself (:meth:`WatchWire.expect`)
in a *crowd*: the watches of one namespace with the same filter and
``after``. The history's ``on_change`` hook (:meth:`WatchWire.changed`)
hears each namespace a change touched just before its watchers are woken,
and one loop callback (after the step that made the change, so the
registration's own reply goes first) answers every crowd that
:meth:`History.ready` has changes for:

- a long-poll's ``200`` is encoded once per crowd, its bytes made once per
  variant (HTTP/1.0 or 1.1, keep-alive, HEAD) with the head aiohttp writes
  (``heads``), and written with one ``transport.write`` per watcher; its
  handler then returns a ``prebuilt.PrebuiltReply`` that was sent already;
- a stream's events are framed once per change (for every crowd in the
  callback), joined once per crowd, put in a chunk once (HTTP/1.1's chunked
  encoding, which the stream uses) and written to every stream of the
  crowd; the stream's task then skips the changes it was sent
  (:attr:`EarlyWatch.upto`).

A crowd with nothing new (its filter matched none of the changes) stays
parked. A watch settled (:meth:`WatchWire.settle`) is never written to, nor
is a client gone. Anything else (a ``410``, a stop, a wait running out, a
watch answered without waiting) takes the handler's own way. The fast way is
taken only when ``REPLY_WIRE.enabled`` says the app's ``on_response_prepare``
holds nothing but the boot-id stamp, which the bytes carry, and for a
stream only when it is not compressed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Sequence

from aiohttp import web

from .. import wire as protocol
from .._history import History, Match
from . import heads
from .prebuilt import Stamp
from .writes import write

__all__ = ["WATCH_WIRE", "EarlyWatch", "WatchWire"]

log = logging.getLogger("aiobootstrap")

CrowdKey = tuple[Hashable, int, bool]
"""A crowd: the filter's parameters, ``after``, and whether it streams."""


class EarlyWatch:
    """A parked watch that a change may answer before its handler resumes (see :meth:`WatchWire.expect`)."""

    __slots__ = ("crowd", "request", "response", "sent", "settled", "upto")

    def __init__(self, request: web.Request, response: web.StreamResponse | None, crowd: _Crowd) -> None:
        self.request = request
        self.response = response
        """The stream's prepared response; ``None`` for a long-poll."""
        self.crowd = crowd
        self.sent = 0
        """Bytes written; 0 until then, or when the client had gone."""
        self.upto: int | None = None
        """The version the written reply goes up to (its ``version``); ``None`` until written."""
        self.settled = False


class _Crowd:
    __slots__ = ("after", "key", "match", "watches")

    def __init__(self, key: CrowdKey, after: int, match: Match | None) -> None:
        self.key = key
        self.after = after
        self.match = match
        self.watches: dict[EarlyWatch, bool] = {}


class WatchWire:
    """The parked watches of every namespace, by crowd, and the bytes a change answers them with."""

    def __init__(self, history: History, boot: Callable[[], str], *, enabled: bool) -> None:
        self._history = history
        self.enabled = enabled
        """Whether replies may skip ``on_response_prepare`` (it holds only the boot-id stamp)."""
        self._crowds: dict[str, dict[CrowdKey, _Crowd]] = {}
        self._due: set[str] = set()
        self._stamp = Stamp(boot)
        self._stamp_lines = b""
        history.on_change = self.changed

    def expect(
        self,
        request: web.Request,
        namespace: str,
        after: int,
        filter_key: Hashable,
        match: Match | None,
        stream: web.StreamResponse | None = None,
    ) -> EarlyWatch:
        """Announce a watch of ``namespace`` after ``after`` (a stream's ``stream``); settle it when its wait is over."""
        crowds = self._crowds.get(namespace)
        if crowds is None:
            crowds = self._crowds[namespace] = {}
        key = (filter_key, after, stream is not None)
        crowd = crowds.get(key)
        if crowd is None:
            crowd = crowds[key] = _Crowd(key, after, match)
        early = EarlyWatch(request, stream, crowd)
        crowd.watches[early] = True
        return early

    def settle(self, early: EarlyWatch, namespace: str) -> None:
        """The watch's wait is over: nothing more is written for it."""
        early.settled = True
        crowd = early.crowd
        if crowd.watches.pop(early, False) and not crowd.watches:
            crowds = self._crowds.get(namespace)
            if crowds is not None and crowds.get(crowd.key) is crowd:
                del crowds[crowd.key]
                if not crowds:
                    del self._crowds[namespace]

    def changed(self, namespace: str) -> None:
        """The history's ``on_change``: answer the crowds of ``namespace`` one loop turn later."""
        if namespace in self._crowds and namespace not in self._due:
            self._due.add(namespace)
            asyncio.get_running_loop().call_soon(self._answer, namespace)

    def _answer(self, namespace: str) -> None:
        self._due.discard(namespace)
        crowds = self._crowds.get(namespace)
        if not crowds:
            return
        self._stamp_lines = self._stamp.lines()
        frames: dict[int, bytes] = {}  # id(change) -> its event: framed once for every crowd
        for key, crowd in list(crowds.items()):
            ready = self._history.ready(namespace, crowd.after, crowd.match)
            if ready is None:
                continue
            changes, version = ready
            try:
                if key[2]:
                    self._stream(crowd, changes, version, frames)
                else:
                    self._long_poll(crowd, changes, version)
            except Exception:
                log.exception("An early watch reply failed")  # each watch's own task still answers it
            del crowds[key]
        if not crowds:
            del self._crowds[namespace]

    def _long_poll(self, crowd: _Crowd, changes: Sequence[protocol.WatchedChange], version: int) -> None:
        body = protocol.encode_watch(changes, version)
        made: dict[int, bytes] = {}
        for early in crowd.watches:
            # Read now, not at announcing: its first reading fills the request's cache of properties.
            variant = heads.variant(early.request)
            data = made.get(variant)
            if data is None:
                head = heads.head(heads.OK, heads.JSON_LINE, len(body), self._stamp_lines, variant)
                data = made[variant] = head if variant & heads.HEAD else head + body
            _send(early, data, version)

    def _stream(
        self,
        crowd: _Crowd,
        changes: Sequence[protocol.WatchedChange],
        version: int,
        frames: dict[int, bytes],
    ) -> None:
        events = []
        for change in changes:
            event = frames.get(id(change))
            if event is None:
                event = frames[id(change)] = protocol.sse_event(change)
            events.append(event)
        data = b"".join(events)
        chunk = b"%x\r\n%b\r\n" % (len(data), data)
        for early in crowd.watches:
            response = early.response
            if response is None or response.compression:
                continue  # its own task writes through the response's compressor
            # The writer chunks what aiohttp did not know the length of (HTTP/1.1); the header says so.
            chunked = response.headers.get("Transfer-Encoding") == "chunked"
            _send(early, chunk if chunked else data, version)


def _send(early: EarlyWatch, data: bytes, version: int) -> None:
    if early.settled or early.upto is not None:
        return
    early.upto = version
    if write(early.request, data):
        early.sent = len(data)


WATCH_WIRE = web.AppKey("watch_wire", WatchWire)
"""The app's parked watches, by crowd, and their pre-built replies."""
