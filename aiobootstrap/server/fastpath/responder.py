"""The one responder: a face's typed result (``replies``) written as pre-built bytes or as aiohttp's reply.

Every face route is served through :func:`responding` (``face.Route.definition``
applies it): the handler returns what it answers (``replies.Reply``) and
:func:`respond` decides how, asking the app's one rule (``eligible``) once:

- a ``200`` text or small JSON reply, and a get's record: pre-built bytes
  (``gets.GetReplies``: a registration's ``OK`` cached per variant, a record's
  body per version, its whole ``200`` per variant and second), or aiohttp's
  ``web.Response`` of the same bytes when the rule says no, or the reply is
  not a ``200``, or its body is large (written apart, a slice at a time);
- a get that waits (``RecordWait``): announced to the fast path before it
  parks, so a registration's delivery writes it at once (one write per
  waiter, before its task resumes), then settled as its wait ends;
- a long-poll watch (``WatchWait``): announced in its group
  (``watches.WatchReplies``), written as the change lands; a stream of events
  (``EventStream``) likewise for each of its waits;
- aiohttp's own reply (``web.StreamResponse``): returned as it is.

No face builds bytes, announces a waiter or settles one: all of it is here
and in the rooms it calls.
"""

from __future__ import annotations

import asyncio
import functools
import time

from aiohttp import web
from aiohttp.typedefs import Handler

from ..._names import VERSION_HEADER
from ...exceptions import BootstrapError, HistoryGone, NotRegistered, ShuttingDown
from ...wire.errors import error_body
from ...wire.routes import JSON_TYPE
from ...wire.watch import EVENT_STREAM
from ..appkeys import CONFIG, HISTORY, REGISTRY, WATCH_FIGURES
from ..change_words import CHANGE_WORDS
from .batches import BATCH_REPLIES, Parts, batch_parts
from .gets import GET_REPLIES, SEPARATE_BODY_OVER, GetReplies, GetReply
from .heads import TEXT_TYPE
from .replies import (
    BatchReply,
    EventStream,
    FaceHandler,
    JsonReply,
    RecordReply,
    RecordWait,
    Reply,
    TextReply,
    WatchWait,
)
from .watches import WATCH_REPLIES, PendingWatch
from .writes import Body, write_stream

__all__ = ["json_reply", "respond", "responding"]

_OK = "OK"
_ENCODE_CHUNK = 4096
"""Batch items encoded between two turns of the loop."""
_PING = b": ping\n\n"


def responding(handler: FaceHandler) -> Handler:
    """``handler`` as aiohttp calls it: its result written by :func:`respond`."""

    @functools.wraps(handler)
    async def responded(request: web.Request) -> web.StreamResponse:
        result = await handler(request)
        if type(result) is TextReply:  # a registration's OK: no other frame on the busiest way
            return _text(request, result)
        if type(result) is RecordWait:  # a get: no frame of respond's either
            return await _record_wait(request, result)
        if isinstance(result, web.StreamResponse):
            return result
        return await respond(request, result)

    return responded


async def respond(request: web.Request, result: Reply) -> web.StreamResponse:
    """The reply of ``result`` to ``request``: pre-built bytes where the app's rule allows, else aiohttp's."""
    if isinstance(result, TextReply):
        return _text(request, result)
    if isinstance(result, RecordWait):
        return await _record_wait(request, result)
    if isinstance(result, RecordReply):
        replies = request.app[GET_REPLIES]
        if replies.eligible(request):
            return GetReply(request, replies, result.record, whole=result.whole)
        record = result.record
        return await json_reply(request, replies.body(record, result.whole), record.version)
    if isinstance(result, JsonReply):
        return await _json(request, result)
    if isinstance(result, BatchReply):
        return await _json(request, JsonReply(await _batch(request, result)))
    if isinstance(result, WatchWait):
        return await _watch(request, result)
    if isinstance(result, EventStream):
        with request.app[HISTORY].hold():  # a stream over the limit is refused before it starts
            return await _stream(request, result)
    return result


def _text(request: web.Request, reply: TextReply) -> web.StreamResponse:
    if reply.status == 200:
        replies = request.app[GET_REPLIES]
        if replies.eligible(request):
            if reply.version is None and reply.text == _OK:
                # Written now (its bytes cached per variant and second), with the waiters it woke.
                return replies.ok_written(request)
            return replies.text(request, reply.text.encode(), reply.version)
    if reply.version is None:
        return web.Response(status=reply.status, text=reply.text)
    # Content-Type first, as the pre-built bytes say it (aiohttp would put it after the headers given).
    headers = {"Content-Type": TEXT_TYPE, VERSION_HEADER: str(reply.version)}
    return web.Response(status=reply.status, body=reply.text.encode(), headers=headers)


async def _json(request: web.Request, reply: JsonReply) -> web.StreamResponse:
    body = reply.body
    if reply.status == 200:
        replies = request.app[GET_REPLIES]
        if replies.eligible(request):
            if isinstance(body, bytes):
                if len(body) <= SEPARATE_BODY_OVER:
                    if reply.shared and reply.version is None:
                        return replies.shared_json(request, body)  # its whole 200 made once per second
                    return replies.json(request, body, reply.version)
            elif sum(map(len, body)) <= SEPARATE_BODY_OVER:
                return replies.json(request, b"".join(body), reply.version)
    return await json_reply(request, body, reply.version, reply.status)


async def json_reply(
    request: web.Request, body: Body, version: int | None = None, status: int = 200
) -> web.StreamResponse:
    """aiohttp's JSON reply of ``body``, which may be shared by many replies at once.

    ``body`` is one ``bytes`` or the parts of one (a batch's, whose large items
    are the records' own bodies): they are written one after the other, never
    joined per reply when large. ``version``, when given, goes in the
    ``X-Aiobootstrap-Version`` header.
    """
    # Content-Type first, as the pre-built bytes say it (aiohttp would put it after the headers given).
    headers = {"Content-Type": JSON_TYPE}
    if version is not None:
        headers[VERSION_HEADER] = str(version)
    length = len(body) if isinstance(body, bytes) else sum(map(len, body))
    if length <= SEPARATE_BODY_OVER:
        whole = body if isinstance(body, bytes) else b"".join(body)
        return web.Response(status=status, body=whole, headers=headers)
    # web.Response joins headers and body into one new bytes object (on Python
    # before 3.12.9): a private copy of a 20 MB reply per getter in flight.
    # Written apart, every getter sends the registration's one bytes object.
    response = web.StreamResponse(status=status, headers=headers)
    response.content_length = length
    await response.prepare(request)
    await write_stream(request, response, body)
    await response.write_eof()
    return response


async def _batch(request: web.Request, batch: BatchReply) -> Parts:
    """The batch's body: the getters woken together share one, and every getter a large item's body."""
    shared, asked, found, version = request.app[BATCH_REPLIES], batch.asked, batch.records, batch.version
    body = shared.get(asked, found, version)
    if body is None:
        body = await _batch_body(batch, request.app[GET_REPLIES])
        shared.keep(asked, found, version, body)
    return body


async def _batch_body(batch: BatchReply, replies: GetReplies) -> Parts:
    items: list[bytes] = []
    found, item, whole = batch.records, batch.item, batch.whole
    for start in range(0, len(found), _ENCODE_CHUNK):
        if start:
            # Tens of thousands of records not encoded yet take a while: let other requests in.
            await asyncio.sleep(0)
        items.extend(
            item(record, replies.body(record, whole)) for record in found[start : start + _ENCODE_CHUNK]
        )
    return batch_parts(batch.field, items, batch.version)


async def _record_wait(request: web.Request, get: RecordWait) -> web.StreamResponse:
    """Wait for the record; a waiter woken by a registration is written at its delivery, before it resumes."""
    app = request.app
    replies = app[GET_REPLIES]
    key, after, wait, whole = get.key, get.after, get.wait, get.whole
    if wait <= 0 and get.counted is None:
        # A read (a Mooncake GET): nothing announced, settled or counted, so an error is the answer as it is.
        record = await app[REGISTRY].wait(key, 0, after)
        if record is None:
            return await respond(request, get.missing())
        if replies.eligible(request):
            return GetReply(request, replies, record, None, whole)
        return await json_reply(request, replies.body(record, whole), record.version)
    prebuilt = replies.eligible(request)
    pending = replies.expect(request, key, after, whole) if prebuilt and wait > 0 else None
    since = time.time()
    record = None
    try:
        record = await app[REGISTRY].wait(key, wait, after)
    except NotRegistered:
        raise
    except BootstrapError:
        if pending is None or pending.record is None:
            if get.counted is not None:
                get.counted.gets["rejected"] += 1
            raise  # not answered yet: the error is the answer
    finally:
        sent = None if pending is None else replies.settle(pending)
    if sent is not None:
        record = sent  # answered already, whatever came after (a newer record, a shutdown, an outage)
    if get.counted is not None:
        get.counted.count_get(since, [] if record is None else [record], expired=record is None)
    if record is None:
        return await respond(request, get.missing())
    if prebuilt:
        return GetReply(request, replies, record, pending, whole)
    return await json_reply(request, replies.body(record, whole), record.version)


async def _watch(request: web.Request, watch: WatchWait) -> web.StreamResponse:
    """A long-poll: parked in its group, so a change's bytes are written to it as the change lands."""
    replies = request.app[WATCH_REPLIES]
    namespace = watch.namespace
    pending = None
    if watch.wait > 0 and replies.eligible(request):
        pending = replies.expect(
            request,
            namespace,
            watch.after,
            watch.group,
            watch.match,
            waits=watch.waits,
            findings=watch.findings,
        )
    elif watch.own is not None:
        return await respond(request, await watch.own())
    try:
        # A watch told counts ends its wait when the fast path answered it for them (``pending``'s end).
        changes, version = await request.app[HISTORY].since(
            namespace, watch.after, watch.wait, watch.match, end=pending
        )
    except (HistoryGone, ShuttingDown) as exc:
        if pending is None or pending.upto is None:
            if isinstance(exc, HistoryGone):
                return await respond(request, watch.gone(exc))
            raise
    finally:
        if pending is not None:
            replies.settle(pending, namespace)
    if pending is not None and pending.upto is not None:
        return replies.written(request, pending)  # the fast path wrote its 200 already
    return await respond(request, watch.answer(changes, version))


async def _stream(request: web.Request, stream: EventStream) -> web.StreamResponse:
    """Server-sent events: each wait parked in its group, so a change's events are written as it lands."""
    app = request.app
    history, words, ping = app[HISTORY], app[CHANGE_WORDS], app[CONFIG].watch_ping
    namespace, match = stream.namespace, stream.match
    try:
        # The first read before the stream starts: a position already gone is a plain 410.
        changes, after = await history.since(namespace, stream.after, 0, match, held=True)
    except HistoryGone as exc:
        return await respond(request, stream.gone(exc))
    response = web.StreamResponse(
        headers={
            "Content-Type": EVENT_STREAM,
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    figures = app[WATCH_FIGURES]
    figures.streams += 1
    replies = app.get(WATCH_REPLIES)
    if replies is not None and not replies.eligible(request):
        replies = None
    try:
        # Headers out at once, before the first change: the client knows the stream is up.
        await response.write(b"".join(map(words.events, changes)) or _PING)
        while True:
            pending: PendingWatch | None = None
            if replies is not None:
                pending = replies.expect(request, namespace, after, stream.group, match, response)
            try:
                changes, after = await history.since(namespace, after, ping, match, held=True)
            finally:
                if replies is not None and pending is not None:
                    replies.settle(pending, namespace)
            if pending is not None and (upto := pending.upto) is not None:
                # The fast path sent the changes up to there; only what came after is left to write.
                changes = [change for change in changes if change.version > upto]
                after = max(after, upto)
                if not changes:
                    # Its bytes went below the writer: wait here as its write would, for a client slow to read.
                    await request.writer.drain()
                    continue
            await response.write(b"".join(map(words.events, changes)) if changes else _PING)
    except HistoryGone as exc:
        data = error_body(exc.detail, version=exc.version)
        await response.write(b"event: gone\ndata: " + data + b"\n\n")
    except ShuttingDown:
        pass
    except ConnectionResetError:
        return response  # the client went away
    finally:
        figures.streams -= 1
    await response.write_eof()
    return response
