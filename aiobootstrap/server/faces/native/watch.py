"""``GET /watch``: a namespace's changes after a version, as a long-poll reply or a stream of server-sent events.

The history (``core/history``) holds the changes and parks the watchers; this is
its adapter to HTTP. A request that accepts ``text/event-stream`` gets a
stream: one event per change (``id:`` its version, ``data:`` the change),
resumed after ``Last-Event-ID`` when given (it wins over ``after``), a
comment line when the history was quiet for the config's ``watch_ping``
seconds, and an ``event: gone`` (then the end) when the history no longer
reaches back to the stream's position. A stopping server ends every stream
cleanly: the history's ``close`` wakes it, and it ends its body.

The framing is three lines (``wire.sse_event``), written here rather than
through ``aiohttp-sse``: that library runs a ping task per stream on its own
clock and ends streams through its own ``stop_streaming``, where a stream here
must ping only when quiet and end with the history's one shutdown path.
"""

from __future__ import annotations

from collections.abc import Hashable

from aiohttp import web

from .... import wire
from ...._ranks import RankSet
from ....core.history import History, Match
from ....exceptions import BadRequest, HistoryGone, ShuttingDown
from ...appkeys import CONFIG, HISTORY, KIND_TABLE, REGISTRY
from ...fastpath.watches import WATCH_REPLIES, PendingWatch, WatchReplies
from ...watch_metrics import WATCH_FIGURES
from ..common import namespace_of, param, wait_seconds
from .watch_counts import CountsTold, gone, watch_with_counts

__all__ = ["watch"]

_PING = b": ping\n\n"

def _match(request: web.Request) -> tuple[Match | None, Hashable]:
    """The filter the ``kind``, ``role`` and ``ranks`` parameters name (``None`` when none is given), and its key.

    Watches with equal keys want the same changes: the fast path encodes their reply once.
    """
    kind_text, role_text, ranks_text = param(request, "kind"), param(request, "role"), param(request, "ranks")
    kind = None
    if kind_text is not None:
        listed = request.app[KIND_TABLE].listed()  # the kinds the faces declare listed (KindSpec.listed)
        if kind_text not in listed:
            raise BadRequest(f"Invalid kind parameter: give one of {', '.join(sorted(listed))}.")
        kind = kind_text
    role = None if role_text is None else wire.parse_role_param(role_text)
    ranks: RankSet | None = None if ranks_text is None else wire.parse_ranks(ranks_text)
    key = (kind, role, ranks_text)
    if kind is None and role is None and ranks is None:
        return None, key

    def match(change: wire.WatchedChange) -> bool:
        if kind is not None and change.kind != kind:
            return False
        if change.url is not None or change.key is not None:
            # An encoder list change, or a named record's (a prefill rank, a Mooncake key), has no role or
            # rank: only a kind filter selects it.
            return role is None and ranks is None
        if role is not None and change.role != role:
            return False
        return ranks is None or (change.rank is not None and change.rank in ranks)

    return match, key


def _wants_stream(request: web.Request) -> bool:
    return any(
        part.split(";", 1)[0].strip() == wire.EVENT_STREAM
        for part in request.headers.get("Accept", "").split(",")
    )


async def watch(request: web.Request) -> web.StreamResponse:
    """``GET /watch?after=V[&wait=S][&kind=K][&role=R][&ranks=SET][&boot=ID][&waits=N][&findings=M]``: the changes after V.

    ``boot``: the boot id ``V`` came from; another incarnation's is a ``410`` at once. ``waits`` and
    ``findings``: see ``watch_counts``.
    """
    after = wire.parse_after(param(request, "after"))
    match, filter_key = _match(request)
    namespace = namespace_of(request)
    wait = wait_seconds(request)  # read (and checked) for a stream too, where it means nothing
    stream = _wants_stream(request)
    if stream:
        resume = wire.parse_last_event_id(request.headers.get(wire.LAST_EVENT_ID))
        after = after if resume is None else resume
    history = request.app[HISTORY]
    boot = param(request, "boot")
    if boot is not None and boot != request.app[REGISTRY].incarnation:
        # The version came from another incarnation of the registry: none of it holds here.
        return gone(
            HistoryGone(
                "The registry is not the incarnation that version came from (a new boot id): "
                "read the listing, then watch from its version.",
                await request.app[REGISTRY].version(namespace),
            )
        )
    after = await history.position(namespace, after)
    if stream:
        with history.hold():  # a stream over the limit is refused before it starts
            return await _stream(request, history, namespace, after, match, filter_key)
    counts = CountsTold.asked(request)
    replies = request.app[WATCH_REPLIES]
    pending = None
    if counts is not None and counts.behind:
        wait = 0.0  # told counts that have moved: answered at once
    elif wait > 0 and replies.eligible(request):
        told = (None, None) if counts is None else (counts.waits, counts.findings)
        pending = replies.expect(
            request, namespace, after, filter_key, match, waits=told[0], findings=told[1]
        )
    elif counts is not None:
        return await watch_with_counts(history, namespace, after, wait, match, counts)
    try:
        # A watch told counts ends its wait when the fast path answered it for them (``pending``'s end).
        changes, version = await history.since(namespace, after, wait, match, end=pending)
    except (HistoryGone, ShuttingDown) as exc:
        if pending is None or pending.upto is None:
            if isinstance(exc, HistoryGone):
                return gone(exc)
            raise
    finally:
        if pending is not None:
            replies.settle(pending, namespace)
    if pending is not None and pending.upto is not None:
        return replies.written(request, pending)  # the fast path wrote its 200 already
    body = wire.encode_watch(changes, version) if counts is None else counts.encode(changes, version)
    return web.Response(body=body, content_type=wire.JSON_TYPE)


async def _stream(
    request: web.Request,
    history: History,
    namespace: str,
    after: int,
    match: Match | None,
    filter_key: Hashable,
) -> web.StreamResponse:
    ping = request.app[CONFIG].watch_ping
    try:
        # The first read before the stream starts: a position already gone is a plain 410.
        changes, after = await history.since(namespace, after, 0, match, held=True)
    except HistoryGone as exc:
        return gone(exc)
    response = web.StreamResponse(
        headers={
            "Content-Type": wire.EVENT_STREAM,
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    figures = request.app[WATCH_FIGURES]
    figures.streams += 1
    replies: WatchReplies | None = request.app[WATCH_REPLIES]
    if replies is not None and not replies.eligible(request):
        replies = None
    try:
        # Headers out at once, before the first change: the client knows the stream is up.
        await response.write(b"".join(map(wire.sse_event, changes)) or _PING)
        while True:
            pending: PendingWatch | None = None
            if replies is not None:
                pending = replies.expect(request, namespace, after, filter_key, match, response)
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
            await response.write(b"".join(map(wire.sse_event, changes)) if changes else _PING)
    except HistoryGone as exc:
        data = wire.error_body(exc.detail, version=exc.version)
        await response.write(b"event: gone\ndata: " + data + b"\n\n")
    except ShuttingDown:
        pass
    except ConnectionResetError:
        return response  # the client went away
    finally:
        figures.streams -= 1
    await response.write_eof()
    return response
