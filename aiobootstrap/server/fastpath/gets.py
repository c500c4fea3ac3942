"""The gets' fast path: replies encoded once per record version, and written as bytes below ``web.Response``.

Theory of operation
-------------------
aiohttp answers a ``web.Response`` by filling a header multidict, sending
``on_response_prepare``, serialising the headers and writing them with the
body: about 30 µs a reply, which a thousand waiters woken by one
registration paid one after another. Yet a get's ``200`` differs from one
getter to the next only in what the request decides (HTTP/1.0 or 1.1,
keep-alive or not, ``HEAD``) and, once a second, in its stamp.

:class:`GetReplies` is this module's one object. Its caches (the fast
path's package notes list every cache of the room):

- *bodies*: the encoded reply of each record, keyed by key (and form), held
  with its version; every get path and the batch items share it; a key's is
  replaced by its next version, dropped when the key is deleted, and all are
  dropped on a new boot id (a new incarnation counts its versions again);
- *replies*: the whole ``200`` as one ``bytes`` object (status line, headers
  with the stamp and the record's version, body), keyed by the body's
  identity and the variant (a registration's ``OK`` by the variant alone,
  a face's shared JSON body, ``JsonReply.shared``, by its identity, with no version);
  all dropped when the stamp changes (each second, a new boot id) or at
  :data:`_MAX_CACHED` entries.

Two ways out, both taken only for a request that :attr:`GetReplies.eligible`
allows:

- A *woken* waiter's reply is written at its delivery. The responder announces
  the get (:meth:`GetReplies.expect`, a :class:`PendingGet`);
  :meth:`GetReplies.delivered`, subscribed to the registry's deliveries,
  hears each record delivered, and the gets it answers are written back to
  back (each variant's bytes made once for them all) with the registration's
  own ``OK`` as its handler returns (:meth:`GetReplies.ok_written`), or from
  a loop callback if the step wrote none, before the waiters' tasks resume:
  the k-th waiter's first byte waits for k writes, not for k handler
  completions. As the wait returns, :meth:`GetReplies.settle` says
  what was written; nothing is written after it.
- Every other get (a hit, a wait answered at its deadline) is answered with
  a :class:`GetReply`, a ``web.StreamResponse`` whose ``prepare`` writes them.

Either way aiohttp gets a :class:`GetReply` and treats it like any reply:
it logs the access, keeps or closes the connection as ``keep_alive`` says,
and only then reads the request pipelined behind. A client gone while parked
is never written to. The bytes are aiohttp's own (``tests/test_replies.py``
compares them header by header). A stop's ``503`` to each parked wait, and
a keepalive's ``200`` (:meth:`GetReplies.json`), come from the same stamp
and head builder.

Public aiohttp API but one: the request's ``transport``, ``writer.drain``,
``version``, ``keep_alive`` and ``method``, and the ``StreamResponse``
members aiohttp's request handler calls; the bytes written are counted in
the writer's ``output_size`` through ``aiohttp_internals.count_written``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

from ..._names import VERSION_HEADER
from ...exceptions import SHUTTING_DOWN_DETAIL
from ...wire.errors import error_body
from ...wire.routes import JSON_TYPE
from .eligible import Eligibility
from .heads import CLOSE as _CLOSE
from .heads import HEAD as _HEAD
from .heads import HTTP10 as _HTTP10
from .heads import JSON_LINE as _JSON
from .heads import OK as _OK
from .heads import TEXT_LINE as _TEXT
from .heads import TEXT_TYPE as _TEXT_TYPE
from .heads import head as _head
from .heads import variant as _variant
from .prebuilt import BytesReply, PendingReply, PrebuiltReply, Stamp, TextHeads
from .writes import write, write_sliced

if TYPE_CHECKING:
    from ...store import Key, Record

__all__ = ["GET_REPLIES", "SEPARATE_BODY_OVER", "GetReplies", "GetReply", "PendingGet"]

log = logging.getLogger("aiobootstrap")

SEPARATE_BODY_OVER = 256 * 1024
"""Bodies larger than this are written apart from their head, never copied per reply or second."""

_MAX_CACHED = 256
FEW_WOKEN = 4
"""The most gets a registration wakes whose replies are written before its own ``OK`` (``ok_written``)."""

_VERSION_NAME = VERSION_HEADER.encode()

Encode = Callable[["Record"], bytes]
"""How a record becomes a get's reply bytes: the app passes its kind table's (``KindTable.encode``)."""


class GetReplies:
    """Gets' encoded replies, cached per key and version, and their ``200`` bytes, per variant and second.

    ``encode`` encodes a get's reply of a record (``encode_object``: in form=object);
    ``boot`` reads the boot id (the store's incarnation, which a flushed Redis changes).
    """

    def __init__(
        self,
        encode: Encode,
        boot: Callable[[], str],
        *,
        encode_object: Encode | None = None,
        eligible: Eligibility | None = None,
    ) -> None:
        """``eligible``: the app's one rule (``eligible.ELIGIBILITY``); none allows nothing."""
        self.eligible = Eligibility() if eligible is None else eligible
        """Asked by the responder before it takes a pre-built reply: ``replies.eligible(request)``."""
        self._encode = encode
        self._encode_object = encode if encode_object is None else encode_object
        self._boot = boot
        self.stamp = Stamp(boot)
        """The app's one stamp: every pre-built reply's ``Date``, ``Server`` and boot id (the watches' too)."""
        self._bodies: dict[Key, tuple[int, bytes]] = {}
        self._objects: dict[Key, tuple[int, bytes]] = {}  # the form=object bodies, kept alike
        self._bodies_boot = ""
        """The boot id the bodies were made under."""
        self._expecting: dict[Key, dict[PendingGet, bool]] = {}
        """The gets that may be answered at a delivery, by key, in the order they came."""
        self._due: list[tuple[list[PendingGet], Record]] = []  # delivered, not written yet (flush)
        self._stamp = b""
        """The stamp lines the cached replies carry."""
        # id(body) << 3 | variant -> (body, head, whole): the body is held, so its id is not reused.
        self._cache: dict[int, tuple[bytes, bytes, bytes | None]] = {}
        self._texts = TextHeads()  # a text 200's bytes around its version (text)

    def body(self, record: Record, whole: bool = False) -> bytes:
        """A get's encoded reply of ``record`` (``whole``: form=object), made once per version for all getters."""
        if (boot := self._boot()) != self._bodies_boot:
            # A new incarnation counts its versions again: the old one's bodies would answer for the new's.
            self._bodies_boot = boot
            self._bodies.clear()
            self._objects.clear()
        bodies = self._objects if whole else self._bodies
        cached = bodies.get(record.key)
        if cached is not None and cached[0] == record.version:
            return cached[1]
        body = self._encode_object(record) if whole else self._encode(record)
        bodies[record.key] = (record.version, body)
        return body

    # -- the registry's deliveries, and the gets they answer -----------

    def expect(self, request: web.Request, key: Key, after: int, whole: bool = False) -> PendingGet:
        """Announce a get of ``key`` newer than ``after`` (``whole``: form=object): a delivery may write its
        reply. Settle it after."""
        peers = self._expecting.get(key)
        if peers is None:
            peers = self._expecting[key] = {}
        pending = PendingGet(request, key, after, peers, whole)
        peers[pending] = True
        return pending

    def settle(self, pending: PendingGet) -> Record | None:
        """The get's wait is over: nothing more is written for it. Returns the record written, if any."""
        pending.settled = True
        # Found by its own entry, not by key: the woken waiters hash no key here.
        peers = pending.peers
        if peers.pop(pending, False) and not peers and self._expecting.get(pending.key) is peers:
            del self._expecting[pending.key]
        return pending.record

    def delivered(self, key: Key, record: Record | None) -> None:
        """Subscribed to the registry's deliveries: write the replies of the gets ``record`` answers; forget a deleted key."""
        if record is None:
            self._bodies.pop(key, None)
            self._objects.pop(key, None)
            return
        peers = self._expecting.get(key)
        if peers is None:
            return
        version = record.version
        due = [pending for pending in peers if pending.after < version]
        if due:
            for pending in due:
                del peers[pending]
            if not peers:
                del self._expecting[key]
            # After the step that made the change (with its OK, ok_written), before the woken tasks resume.
            if not self._due:
                asyncio.get_running_loop().call_soon(self.flush)
            self._due.append((due, record))

    def flush(self) -> None:
        """Write the gets delivered since the last flush: with a registration's OK, or a loop turn later."""
        due, self._due = self._due, []
        for crowd, record in due:
            self._answer(crowd, record)

    def _answer(self, due: list[PendingGet], record: Record) -> None:
        """Write ``record``'s reply to each of ``due``: the bytes made once per variant, for all of them."""
        made: dict[int, tuple[bytes, bytes | None, int]] = {}  # by variant (and form): head, body, length
        for pending in due:
            try:
                # The variant is read now, not when the get is announced: its first reading fills
                # the request's cache of properties, 200 bytes per parked waiter otherwise.
                whole = pending.whole
                variant = _variant(pending.request) | whole << 3
                parts = made.get(variant)
                if parts is None:
                    parts = made[variant] = (
                        *self.parts(record, variant & 7, whole),
                        len(self.body(record, whole)),
                    )
                # A large body (parts[1]) waits for its handler, which writes it with flow control.
                if parts[1] is None and pending.write_once(parts[0], parts[2]):
                    pending.record = record
            except Exception:
                log.exception("A pending reply failed")  # the get's own task still answers it

    # -- the bytes ----------------------------------------------------

    def parts(self, record: Record, variant: int, whole: bool = False) -> tuple[bytes, bytes | None]:
        """The reply's head and body, or its whole bytes and ``None`` (small bodies: one object)."""
        if (stamp := self.stamp.lines()) is not self._stamp or len(self._cache) >= _MAX_CACHED:
            self._renew(stamp)
        body = self.body(record, whole)
        cached = self._cache.get(id(body) << 3 | variant)
        if cached is not None and cached[0] is body:
            return cached[1], cached[2]
        fields = _JSON + f"{VERSION_HEADER}: {record.version}\r\n".encode()
        head = _head(_OK, fields, len(body), self._stamp, variant)
        entry: tuple[bytes, bytes, bytes | None]
        if variant & _HEAD:
            entry = (body, head, None)
        elif len(body) > SEPARATE_BODY_OVER:
            entry = (body, head, body)
        else:
            entry = (body, head + body, None)
        self._cache[id(body) << 3 | variant] = entry
        return entry[1], entry[2]

    def ok(self, variant: int) -> bytes:
        """The whole ``200`` text ``OK`` of a registration (or a deletion)."""
        if (stamp := self.stamp.lines()) is not self._stamp or len(self._cache) >= _MAX_CACHED:
            self._renew(stamp)
        cached = self._cache.get(variant)  # no body's id is below 8: the keys do not collide
        if cached is not None:
            return cached[1]
        head = _head(_OK, _TEXT, 2, self._stamp, variant)
        data = head if variant & _HEAD else head + b"OK"
        self._cache[variant] = (b"OK", data, None)
        return data

    def ok_written(self, request: web.Request) -> GetReply:
        """A registration's ``OK``, written now with the gets it woke (:meth:`flush`), before the rest of the
        step: up to :data:`FEW_WOKEN` just before it (a client woken by the ``OK`` reads it before it looks at
        another connection, tens of µs), more just after it (the ``OK`` waits for a few writes only)."""
        data = self.ok(_variant(request))
        if self._due and sum(len(crowd) for crowd, _ in self._due) <= FEW_WOKEN:
            self.flush()
        written = write(request, data)  # if not, its prepare finds the client gone, as any reply's would
        if self._due:
            self.flush()
        return GetReply(request, self, None, sent=len(data) if written else None)

    def text(self, request: web.Request, text: bytes, version: int | None) -> PrebuiltReply:
        """A text ``200``, naming a record's ``version`` if any: a face's write's answer, as a registration's ``OK``."""
        variant = _variant(request)
        data = self._texts.reply(self.stamp.lines(), text, variant, version)
        return PrebuiltReply(
            request, self.stamp, data, len(text), content_type=_TEXT_TYPE, version=version, variant=variant
        )

    def json(self, request: web.Request, body: bytes, version: int | None = None) -> PrebuiltReply:
        """A small JSON ``200`` (a keepalive's, a listing's), naming ``version`` if any, its bytes made per
        reply from this second's stamp."""
        variant = _variant(request)
        fields = _JSON if version is None else _JSON + b"%s: %d\r\n" % (_VERSION_NAME, version)
        head = _head(_OK, fields, len(body), self.stamp.lines(), variant)
        data = head if variant & _HEAD else head + body
        return PrebuiltReply(request, self.stamp, data, len(body), version=version)

    def shared_json(self, request: web.Request, body: bytes) -> PrebuiltReply:
        """A small JSON ``200`` of one ``body`` a face shares (``JsonReply.shared``), made once per second."""
        if (stamp := self.stamp.lines()) is not self._stamp or len(self._cache) >= _MAX_CACHED:
            self._renew(stamp)
        variant = _variant(request)
        slot = ~(id(body) << 3 | variant)  # below 0: apart from the records' (id << 3 | variant) and the OK's
        cached = self._cache.get(slot)
        if cached is None or cached[0] is not body:
            head = _head(_OK, _JSON, len(body), self._stamp, variant)
            cached = self._cache[slot] = (body, head if variant & _HEAD else head + body, None)
        return PrebuiltReply(request, self.stamp, cached[1], len(body))

    def shutting_down(self) -> Callable[[web.BaseRequest], bytes]:
        """The ``503`` a parked wait gets at a stop, as bytes for one write, by the request's HTTP version and method.

        The very reply the front middleware's error reply would make of :class:`ShuttingDown`
        (same headers, the boot id included), with ``Connection: close``: the
        connection is closed after it.
        """
        body = error_body(SHUTTING_DOWN_DETAIL)
        stamp = self.stamp.lines()
        replies = {}
        for variant in (_CLOSE, _CLOSE | _HEAD, _CLOSE | _HTTP10, _CLOSE | _HEAD | _HTTP10):
            head = _head(b"503 Service Unavailable", _JSON, len(body), stamp, variant)
            replies[variant] = head if variant & _HEAD else head + body

        def reply(request: web.BaseRequest) -> bytes:
            return replies[_variant(request) | _CLOSE]

        return reply

    def _renew(self, stamp: bytes) -> None:
        """The cached replies carry another second's stamp (or are too many): dropped, for ``stamp``'s."""
        self._cache.clear()
        self._stamp = stamp


class PendingGet(PendingReply):
    """A get that a delivery may answer before its handler resumes (see :meth:`GetReplies.expect`).

    It writes once at most, and nothing once settled (``prebuilt.PendingReply``).
    ``record`` is then the record sent, whatever the wait goes on to return.
    """

    __slots__ = ("after", "key", "length", "peers", "record", "request", "sent", "settled", "whole")

    def __init__(
        self, request: web.Request, key: Key, after: int, peers: dict[PendingGet, bool], whole: bool = False
    ) -> None:
        self.request = request
        self.settled = False
        self.sent = 0
        self.length = -1
        self.key = key
        self.after = after
        self.peers = peers
        """The gets of the same key awaiting a delivery, this one among them until delivered or settled."""
        self.whole = whole
        """Its reply is the record in form=object."""
        self.record: Record | None = None
        """The record written (its handler's reply, whatever the wait returns); ``None`` until then."""


class GetReply(BytesReply):
    """A ``200`` to return from a handler: its bytes are pre-built, written by ``prepare``.

    A get's reply of ``record`` (``whole``: form=object), or with ``None`` a registration's text ``OK``
    (``sent``: its bytes written already, ``ok_written``).
    When a :class:`PendingGet` already wrote them, ``prepare`` writes nothing.
    """

    def __init__(
        self,
        request: web.Request,
        replies: GetReplies,
        record: Record | None,
        pending: PendingGet | None = None,
        whole: bool = False,
        *,
        sent: int | None = None,
    ) -> None:
        if pending is not None and pending.record is not None:
            sent = pending.sent
        super().__init__(request, replies.stamp, sent=sent)
        self._record = record
        self._replies = replies
        self._whole = whole

    def fields(self) -> tuple[str, int, int | None]:
        record = self._record
        if record is None:
            return _TEXT_TYPE, 2, None
        return JSON_TYPE, len(self._replies.body(record, self._whole)), record.version

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        if self._sent:
            return None
        self._sent = True
        if self._record is None:
            data, body = self._replies.ok(self._variant), None
        else:
            data, body = self._replies.parts(self._record, self._variant, self._whole)
        if not write(request, data):
            raise ConnectionResetError("The client closed the connection before its reply.")
        self._length = len(data)
        if body:
            if not await write_sliced(request, body):
                raise ConnectionResetError("The client closed the connection during its reply.")
            self._length += len(body)
        await request.writer.drain()
        return None


GET_REPLIES = web.AppKey("get_replies", GetReplies)
"""The app's pre-built replies and their caches."""
