"""Batch replies shared: the getters of one set, woken by one registration, send one reply object.

A batch reply (``{"infos": [...], "version": V}``) is made of the records
found, each item's body shared already (``gets.GetReplies.body``); but the
reply itself was joined anew per request, so five hundred waiters of one set
held five hundred copies of it. :class:`BatchReplies` keeps each reply made,
under what the request asked (namespace, kind, role, set, form) and checked
against what it was made of (each record's version, and the namespace's),
for about a second: the requests answered together share it, and a later
one whose records changed makes its own. At most :data:`_KEPT` are kept.

A reply is a sequence of parts (:func:`batch_parts`), not one ``bytes``: an
item larger than :data:`SHARED_ITEM_OVER` is the record's body itself, the
one ``GetReplies.body`` keeps per version, and only the small items between
are joined. Five hundred readers of five hundred different sets over one
4 MiB record held five hundred joined copies of it (2 GiB); they now hold
the one body, and each set its few joined bytes. The parts are written one
after the other with flow control (``writes.write_stream``); on the wire
the reply is the same bytes as the joined one (``wire.results.encode_items``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Sequence

from aiohttp import web

from ...store import Record
from ...wire.results import encode_items

__all__ = ["BATCH_REPLIES", "SHARED_ITEM_OVER", "BatchReplies", "Parts", "batch_parts"]

SHARED_ITEM_OVER = 16 * 1024
"""Items larger than this are kept as the record's own body, never copied into a batch reply."""

Parts = tuple[bytes, ...]
"""A reply as the parts it is written in, in order: its body is their concatenation."""

_KEPT = 16
"""The most batch replies kept at once: the oldest goes first."""

_KEEP_SECONDS = 1.0
"""How long a batch reply is kept for the requests that ask the same."""

_Made = tuple[int, tuple[int, ...]]
"""What a reply was made of: the namespace's version and each record's, in order."""


def _made_of(found: Sequence[Record], version: int) -> _Made:
    return version, tuple(record.version for record in found)


def batch_parts(field: str, items: Sequence[bytes], version: int) -> Parts:
    """The batch reply ``{field: [items...], "version": V}`` as parts: each large item as itself.

    Items of :data:`SHARED_ITEM_OVER` bytes or less, and the punctuation
    between, are joined into one part per run; with no large item, the reply
    is one part, ``wire.results.encode_items``'s.
    """
    if max(map(len, items), default=0) <= SHARED_ITEM_OVER:
        return (encode_items(field, items, version),)
    parts: list[bytes] = []
    run = [b'{"' + field.encode() + b'":[']
    for index, item in enumerate(items):
        if index:
            run.append(b",")
        if len(item) > SHARED_ITEM_OVER:
            parts.append(b"".join(run))
            parts.append(item)  # the record's body: shared, not copied
            run = []
        else:
            run.append(item)
    run.append(b'],"version":' + str(version).encode() + b"}")
    parts.append(b"".join(run))
    return tuple(parts)


class BatchReplies:
    def __init__(self) -> None:
        self._kept: dict[Hashable, tuple[_Made, Parts]] = {}
        self._sweep: asyncio.TimerHandle | None = None

    def get(self, asked: Hashable, found: Sequence[Record], version: int) -> Parts | None:
        """The reply kept for ``asked``, if it was made of the records ``found`` and ``version``."""
        kept = self._kept.get(asked)
        if kept is None or kept[0] != _made_of(found, version):
            return None
        return kept[1]

    def keep(self, asked: Hashable, found: Sequence[Record], version: int, body: Parts) -> None:
        """Keep ``body``, the reply to ``asked`` made of ``found`` and ``version``, for about a second."""
        self._kept.pop(asked, None)
        if len(self._kept) >= _KEPT:
            del self._kept[next(iter(self._kept))]
        self._kept[asked] = (_made_of(found, version), body)
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(_KEEP_SECONDS, self._forget)

    def _forget(self) -> None:
        self._sweep = None
        self._kept.clear()

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
        self._forget()


BATCH_REPLIES = web.AppKey("batch_replies", BatchReplies)
"""The app's batch replies, shared by the requests answered together."""
