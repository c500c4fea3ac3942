"""``GET /watch``: a change as both ends write and read it, the reply, the query and the SSE framing.

A change is ``{"op": "put"|"delete", "kind", "role", "rank", "version"}``; a
change of the encoder URL list has ``"url"`` in place of ``role`` and
``rank`` (``put``: the URL joined the list; ``delete``: it left it), and a
change of a named record (Mooncake's metadata, SPEC section 14) ``"key"``,
its name: ``{"op", "kind": "metadata", "key", "version"}``. A
long-poll reply is ``{"changes": [...], "version": W}``; a stream sends one
server-sent event per change (``id:`` the version, ``data:`` the change). A
``410`` says the history no longer reaches back to the ``after`` asked, with
the namespace's version. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from .._json import dumps, loads
from .._names import ENCODER_URLS
from .._ranks import RankSet, is_rank
from ..exceptions import BadRequest, UnexpectedReply
from .params import format_ranks, parse_after

__all__ = [
    "EVENT_STREAM",
    "LAST_EVENT_ID",
    "WATCH_PATH",
    "Described",
    "WatchReply",
    "WatchedChange",
    "decode_change",
    "decode_watch",
    "encode_watch",
    "parse_last_event_id",
    "sse_event",
    "watch_query",
]

WATCH_PATH = "/watch"
EVENT_STREAM = "text/event-stream"
LAST_EVENT_ID = "Last-Event-ID"

Op = Literal["put", "delete"]

Described = Mapping[str, Any]
"""A change as the server describes it for the wire (its face's words for it): the JSON object of one
change, ``version`` among its fields, in the order they are written."""


@dataclass(frozen=True, slots=True)
class WatchedChange:
    """One change of a namespace, as ``GET /watch`` reports it.

    ``op`` is ``"put"`` (a registration, or a URL joining the encoder list) or
    ``"delete"`` (an unregister, an expiry, a URL leaving the list). A per-rank
    change names its ``kind``, ``role`` and ``rank`` (``url`` and ``key`` are
    ``None``); an encoder list change has ``kind == "encoder_urls"`` and its
    ``url``, a named record's change its name, ``key`` (``role`` and ``rank``
    are ``None`` in both). ``version`` is the namespace's
    version the change took. No value travels: read the record if you need it.
    """

    op: Op
    kind: str
    version: int
    role: str | None = None
    rank: int | None = None
    url: str | None = None
    key: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The change as the wire writes it."""
        if self.url is not None:
            return {"op": self.op, "kind": self.kind, "url": self.url, "version": self.version}
        if self.key is not None:
            return {"op": self.op, "kind": self.kind, "key": self.key, "version": self.version}
        return {
            "op": self.op,
            "kind": self.kind,
            "role": self.role,
            "rank": self.rank,
            "version": self.version,
        }

    def encode(self) -> bytes:
        return dumps(self.as_json())


@dataclass(frozen=True, slots=True)
class WatchReply:
    """A long-poll reply: the changes after the ``after`` asked, oldest first, and the version to ask after next."""

    changes: tuple[WatchedChange, ...]
    version: int


def _encoded(change: WatchedChange | Described) -> bytes:
    return change.encode() if isinstance(change, WatchedChange) else dumps(change)


def encode_watch(
    changes: Sequence[WatchedChange | Described],
    version: int,
    *,
    waits: int | None = None,
    findings: int | None = None,
) -> bytes:
    """The reply of ``GET /watch``; asked with ``&waits=`` / ``&findings=``, the server's count of waits
    parked or gone so far, and of its encoder probes' changed findings."""
    body = b'{"changes":[' + b",".join(map(_encoded, changes)) + b'],"version":%d' % version
    if waits is not None:
        body += b',"waits":%d' % waits
    if findings is not None:
        body += b',"findings":%d' % findings
    return body + b"}"


def sse_event(change: WatchedChange | Described) -> bytes:
    """One server-sent event: ``id:`` the version, ``data:`` the change (JSON holds no newline)."""
    version = change.version if isinstance(change, WatchedChange) else change["version"]
    return b"id: %d\ndata: %s\n\n" % (version, _encoded(change))


def parse_last_event_id(value: str | None) -> int | None:
    """A ``Last-Event-ID`` header: the version a stream resumes after; ``None`` when absent or empty."""
    if value is None or not value.strip():
        return None
    try:
        return parse_after(value.strip())
    except BadRequest:
        raise BadRequest("Invalid Last-Event-ID header: give the version of the last event seen.") from None


def watch_query(
    after: int,
    wait: float,
    *,
    kind: str | None = None,
    role: str | None = None,
    ranks: RankSet | None = None,
    boot: str | None = None,
) -> dict[str, str]:
    """The query of ``GET /watch`` (``boot``: the boot id ``after`` came from)."""
    query = {"after": str(after), "wait": f"{wait:g}"}
    if boot is not None:
        query["boot"] = boot
    if kind is not None:
        query["kind"] = kind
    if role is not None:
        query["role"] = role
    if ranks is not None:
        query["ranks"] = format_ranks(ranks)
    return query


def _is_version(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def decode_change(item: Any) -> WatchedChange:
    """One change of a reply or an event; :class:`UnexpectedReply` when it is not one."""
    if not isinstance(item, dict):
        raise UnexpectedReply("The server sent a change that is not a JSON object.")
    op, kind, version = item.get("op"), item.get("kind"), item.get("version")
    if op not in ("put", "delete") or not isinstance(kind, str) or not _is_version(version):
        raise UnexpectedReply("The server sent a change without a valid op, kind and version.")
    if kind == ENCODER_URLS:
        url = item.get("url")
        if not isinstance(url, str):
            raise UnexpectedReply("The server sent an encoder list change without its url.")
        return WatchedChange(op, kind, version, url=url)
    if "key" in item:
        key = item["key"]
        if not isinstance(key, str) or not key:
            raise UnexpectedReply("The server sent a named record's change without a valid key.")
        return WatchedChange(op, kind, version, key=key)
    role, rank = item.get("role"), item.get("rank")
    if not isinstance(role, str) or not is_rank(rank):
        raise UnexpectedReply("The server sent a change without a valid role and rank.")
    return WatchedChange(op, kind, version, role=role, rank=rank)


def decode_watch(payload: bytes) -> WatchReply:
    """A ``200`` of ``GET /watch``."""
    try:
        reply = loads(payload)
    except (ValueError, RecursionError):
        raise UnexpectedReply("The server's watch reply is not JSON.") from None
    changes = reply.get("changes") if isinstance(reply, dict) else None
    version = reply.get("version") if isinstance(reply, dict) else None
    if not isinstance(changes, list) or not _is_version(version):
        raise UnexpectedReply("The server's watch reply has no changes list and version.")
    return WatchReply(tuple(decode_change(item) for item in changes), version)
