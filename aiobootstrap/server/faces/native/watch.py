"""``GET /watch``: a namespace's changes after a version, as a long-poll reply or a stream of server-sent events.

The history (``core/history``) holds the changes and parks the watchers; this is
its adapter to HTTP. A request that accepts ``text/event-stream`` gets a
stream: one event per change (``id:`` its version, ``data:`` the change),
resumed after ``Last-Event-ID`` when given (it wins over ``after``), a
comment line when the history was quiet for the config's ``watch_ping``
seconds, and an ``event: gone`` (then the end) when the history no longer
reaches back to the stream's position. A stopping server ends every stream
cleanly: the history's ``close`` wakes it, and it ends its body.

The handler returns what it answers (``fastpath/replies.py``): a long-poll a
``WatchWait``, a stream an ``EventStream``, which the fast path's one responder
parks and writes. The framing is three lines (``wire.watch.sse_event``, each change
in its kind's words: ``change_words``), written there rather than through
``aiohttp-sse``: that library runs a ping task per stream on its own clock and
ends streams through its own ``stop_streaming``, where a stream there must ping
only when quiet and end with the history's one shutdown path.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable

from aiohttp import web

from ...._ranks import RankSet
from ....core.history import Filter, Match
from ....exceptions import BadRequest, HistoryGone
from ....wire.bodies import parse_role_param
from ....wire.params import parse_after, parse_ranks
from ....wire.watch import EVENT_STREAM, LAST_EVENT_ID, parse_last_event_id
from ...appkeys import HISTORY, KIND_TABLE, REGISTRY
from ...change_words import CHANGE_WORDS
from ...fastpath.replies import EventStream, JsonReply, Reply, WatchWait
from ..common import namespace_of, param, wait_seconds
from .watch_counts import SeenCounts, gone, watch_with_counts

__all__ = ["watch"]


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
    role = None if role_text is None else parse_role_param(role_text)
    ranks: RankSet | None = None if ranks_text is None else parse_ranks(ranks_text)
    key = (kind, role, ranks_text)
    if kind is None and role is None and ranks is None:
        return None, key
    # A set record's member (an encoder URL), or a named record's change (a prefill rank, a Mooncake key), is
    # shown without role or rank: only a kind filter selects it. The core indexes a Filter's watches by it.
    return Filter(kind, role, ranks), key


def _wants_stream(request: web.Request) -> bool:
    return any(
        part.split(";", 1)[0].strip() == EVENT_STREAM for part in request.headers.get("Accept", "").split(",")
    )


async def watch(request: web.Request) -> Reply:
    """``GET /watch?after=V[&wait=S][&kind=K][&role=R][&ranks=SET][&boot=ID][&waits=N][&findings=M]``: the changes after V.

    ``boot``: the boot id ``V`` came from; another incarnation's is a ``410`` at once. ``waits`` and
    ``findings``: see ``watch_counts``.
    """
    after = parse_after(param(request, "after"))
    match, filter_key = _match(request)
    namespace = namespace_of(request)
    wait = wait_seconds(request)  # read (and checked) for a stream too, where it means nothing
    stream = _wants_stream(request)
    if stream:
        resume = parse_last_event_id(request.headers.get(LAST_EVENT_ID))
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
        return EventStream(namespace, after, match, filter_key, gone)
    words = request.app[CHANGE_WORDS]
    counts = SeenCounts.asked(request)
    if counts is None:
        return WatchWait(
            namespace,
            after,
            wait,
            match,
            filter_key,
            lambda changes, version: JsonReply(words.reply(changes, version)),
            gone,
        )
    own = None
    if counts.behind:
        wait = 0.0  # told counts that have moved: answered at once
    else:  # when the fast path does not park it, its own task follows the counts
        own = functools.partial(watch_with_counts, history, namespace, after, wait, match, counts, words)
    return WatchWait(
        namespace,
        after,
        wait,
        match,
        filter_key,
        lambda changes, version: JsonReply(counts.encode(words, changes, version)),
        gone,
        counts.waits,
        counts.findings,
        own,
    )
