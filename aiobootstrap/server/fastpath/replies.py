"""What a face's handler returns: its reply as a typed result, which the one responder (``responder``) writes.

A handler says *what* it answers; :mod:`.responder` decides *how*: pre-built
bytes below ``web.Response`` when the app's one rule (``eligible``) allows
them, aiohttp's own reply otherwise, the same bytes either way. These types
are all a face imports of the fast path:

- :class:`TextReply`: a text reply (a registration's ``OK``, Mooncake's
  ``metadata updated``, the engines' text ``4xx``/``503``);
- :class:`JsonReply`: a JSON reply (a listing, a lease, a batch's parts,
  a ``404``'s body);
- :class:`RecordReply`: a get's ``200`` of a record, its body made once per
  version (``gets.GetReplies.body``);
- :class:`BatchReply`: a batch get's ``200`` of the records found, each
  item made of its record's body, the reply shared by the getters that ask
  the same of the same records (``batches``);
- :class:`RecordWait`: a get that waits for a key's record newer than a
  version: a waiter woken by a registration is written at its delivery, one
  write per waiter, before its task resumes;
- :class:`WatchWait`: a long-poll of a namespace's changes, answered by
  group as a change lands (``watches``);
- :class:`EventStream`: a stream of a namespace's changes as server-sent events;
- ``web.StreamResponse``: aiohttp's own reply, for what no type here says
  (a redirect, a page), returned as it is.

An error is raised (a ``BootstrapError``: the front middleware's error reply)
or, when its body is a face's own, a :class:`TextReply` or :class:`JsonReply`
of its status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias

from aiohttp import web

if TYPE_CHECKING:
    from ...core.history import LoggedChange, Match
    from ...exceptions import HistoryGone
    from ...store import Key, Record

__all__ = [
    "BatchReply",
    "EventStream",
    "FaceHandler",
    "GetCounts",
    "JsonReply",
    "RecordReply",
    "RecordWait",
    "Reply",
    "TextReply",
    "WatchWait",
]


@dataclass(slots=True)
class TextReply:
    """A ``text/plain`` reply of ``text`` (``version``: its ``X-Aiobootstrap-Version``, if any)."""

    text: str
    status: int = 200
    version: int | None = None


@dataclass(slots=True)
class JsonReply:
    """An ``application/json`` reply of ``body``: one ``bytes``, or the parts of one (a batch's, whose large
    items are the records' own bodies, written one after the other, never joined per reply when large)."""

    body: bytes | Sequence[bytes]
    status: int = 200
    version: int | None = None
    shared: bool = False
    """``body`` is one ``bytes`` object the face hands to every reply until what it says changes (made once
    per version of the record it is made of, say): its whole ``200`` is made once per variant and second, as
    a get's record's is, not per reply."""


@dataclass(slots=True)
class RecordReply:
    """A get's ``200`` of ``record``: its encoded body (``whole``: form=object), with its version."""

    record: Record
    whole: bool = False


@dataclass(slots=True)
class BatchReply:
    """A batch get's ``200``: ``{field: [items...], "version": version}`` of the ``records`` found, each
    item ``item(record, body)`` of its record's encoded body (``whole``: form=object).

    ``asked``: what the request asked (namespace, kind, role, set, form): the
    getters asking the same of the same records share one reply.
    """

    asked: Hashable
    records: list[Record]
    version: int
    field: str
    item: Callable[[Record, bytes], bytes]
    whole: bool = False


class GetCounts(Protocol):
    """What counts the gets by outcome (the app's ``metrics.Metrics``)."""

    gets: dict[str, int]

    def count_get(self, since: float, found: Sequence[Record], expired: bool) -> None: ...


@dataclass(slots=True)
class RecordWait:
    """A get of ``key``'s record newer than ``after``, waiting up to ``wait`` seconds.

    The responder waits on the registry; a waiter that a registration wakes is
    written at its delivery (``gets.GetReplies.expect``), and its reply is that
    record's whatever the wait goes on to return. ``missing`` is the reply when
    no such record came. ``counted``: the app's metrics, when the get counts in
    ``aiobootstrap_gets_total`` (hit, woken, expired; rejected when the wait fails).
    """

    key: Key
    after: int
    wait: float
    missing: Callable[[], Reply]
    whole: bool = False
    counted: GetCounts | None = None


@dataclass(slots=True)
class WatchWait:
    """A long-poll of ``namespace``'s changes after ``after`` that ``match`` (``group``: the filter's key:
    watches of equal keys want the same changes), waiting up to ``wait`` seconds on the app's history.

    ``answer`` is its reply of the changes found and the version they go up to;
    ``gone`` its reply when the history no longer reaches back to ``after``.
    ``waits``/``findings``: the counts it was told (``None``: not asked), so a
    change of those answers it too; ``own``: how it is answered when the fast
    path does not park it (its own task following the counts).
    """

    namespace: str
    after: int
    wait: float
    match: Match | None
    group: Hashable
    answer: Callable[[Sequence[LoggedChange], int], Reply]
    gone: Callable[[HistoryGone], Reply]
    waits: int | None = None
    findings: int | None = None
    own: Callable[[], Awaitable[Reply]] | None = None


@dataclass(slots=True)
class EventStream:
    """A stream of ``namespace``'s changes after ``after`` that ``match`` (``group``: as a watch's), as
    server-sent events: ``gone`` is the reply when the first read finds the history gone past ``after``.

    The responder holds a place on the history (``History.hold``: a stream
    over the limit is refused before it starts), writes each change's events
    (``change_words``), a ping comment when quiet for the config's
    ``watch_ping`` seconds and an ``event: gone`` when the history no longer
    reaches back, and counts the streams open (``appkeys.WatchFigures``).
    """

    namespace: str
    after: int
    match: Match | None
    group: Hashable
    gone: Callable[[HistoryGone], Reply]


Reply: TypeAlias = "TextReply | JsonReply | RecordReply | RecordWait | BatchReply | WatchWait | EventStream | web.StreamResponse"
"""What a face's handler returns (see the top)."""

FaceHandler = Callable[[web.Request], Awaitable[Reply]]
"""A face's handler: what ``face.Route`` serves, through the responder."""
