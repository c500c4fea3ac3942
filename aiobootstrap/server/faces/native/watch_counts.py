"""``GET /watch``'s ``&waits=N`` and ``&findings=M`` (the page's): what a watch was told, and its way
when the fast path (``fastpath/watches.py``) cannot take it.

A watch told ``waits: N`` is answered, with no change, once a wait has
parked or gone anywhere since that reply; one told ``findings: M`` once the
encoder probes found something else (neither is a change of the records).
Its reply says the counts now. Where the fast path may answer it, the handler parks
it as any watch and the fast path answers it when the counts move; here, where
it is not (or the watch does not wait), one request races the history and
the counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ....core.history import History, LoggedChange, Match
from ....core.parking import Parking
from ....core.tally import Tally
from ....exceptions import HistoryGone
from ....wire.errors import error_body
from ....wire.params import parse_findings, parse_waits
from ...appkeys import PROBE_CHANGES, REGISTRY
from ...change_words import ChangeWords
from ...fastpath.replies import JsonReply
from ..common import param

__all__ = ["SeenCounts", "gone", "watch_with_counts"]


def gone(exc: HistoryGone) -> JsonReply:
    """The ``410`` of a watch whose position the history no longer reaches (``version``: where it starts)."""
    return JsonReply(error_body(exc.detail, version=exc.version), 410)


@dataclass(frozen=True, slots=True)
class SeenCounts:
    """The counts a watch was told: ``waits``, and ``findings`` (``None``: not asked, or, for findings,
    nothing probes here), with where they are now: ``Parking.wait_changes`` and the probes' tally, ``probed``
    (``appkeys.PROBE_CHANGES``)."""

    parking: Parking
    probed: Tally | None
    waits: int | None
    findings: int | None

    @classmethod
    def asked(cls, request: web.Request) -> SeenCounts | None:
        """The request's; ``None`` when it asked neither. A bad count is a ``400`` before anything waits."""
        waits, findings = param(request, "waits"), param(request, "findings")
        if waits is None and findings is None:
            return None
        moves = None if waits is None else parse_waits(waits)
        found = None if findings is None else parse_findings(findings)
        probes = request.app.get(PROBE_CHANGES)
        return cls(request.app[REGISTRY].parking, probes, moves, None if probes is None else found)

    @property
    def behind(self) -> bool:
        """Whether a count told has moved already (the watch is answered at once)."""
        probes = self.probed
        return (self.waits is not None and self.waits != self.parking.wait_changes.count) or (
            self.findings is not None and probes is not None and self.findings != probes.count
        )

    def encode(self, words: ChangeWords, changes: Sequence[LoggedChange], version: int) -> bytes:
        """The reply, saying the counts asked for as they are now."""
        probes = self.probed
        return words.reply(
            changes,
            version,
            waits=None if self.waits is None else self.parking.wait_changes.count,
            findings=None if self.findings is None or probes is None else probes.count,
        )


async def watch_with_counts(
    history: History,
    namespace: str,
    after: int,
    wait: float,
    match: Match | None,
    counts: SeenCounts,
    words: ChangeWords,
) -> JsonReply:
    """Answered at a change as any watch, or once a count told has moved: three waits raced."""
    waiting: list[Coroutine[Any, Any, None]] = []
    if counts.waits is not None:
        waiting.append(counts.parking.moved(counts.waits, wait))
    if counts.findings is not None and counts.probed is not None:
        waiting.append(counts.probed.past(counts.findings, wait))
    told = asyncio.ensure_future(history.since(namespace, after, wait, match))
    moving = [asyncio.ensure_future(look) for look in waiting]
    try:
        await asyncio.wait((told, *moving), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (told, *moving):
            task.cancel()
        await asyncio.gather(told, *moving, return_exceptions=True)
    try:
        changes, version = (
            told.result() if not told.cancelled() else await history.since(namespace, after, 0, match)
        )
    except HistoryGone as exc:
        return gone(exc)
    return JsonReply(counts.encode(words, changes, version))
