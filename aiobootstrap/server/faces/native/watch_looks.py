"""``GET /watch``'s ``&waits=N`` and ``&findings=M`` (the page's): what a watch was told, and its way
when the fast path (``watch_replies``) cannot take it.

A watch told ``waits: N`` is answered, with no change, once a wait has
parked or gone anywhere since that reply; one told ``findings: M`` once the
encoder probes found something else (neither is a change of the records).
Its reply says the counts now. Where the wire is enabled the handler parks
it as any watch and the wire answers it when the counts move; here, where
it is not (or the watch does not wait), one request races the history and
the counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from .... import wire as protocol
from ....core.history import History, Match
from ....core.parking import Parking
from ....exceptions import HistoryGone
from ...appkeys import REGISTRY
from ..common import param
from ..encoders.health import ENCODER_HEALTH, EncoderHealth

__all__ = ["Looks", "gone", "watch_with_looks"]


def gone(exc: HistoryGone) -> web.Response:
    return web.Response(
        status=410,
        body=protocol.error_body(exc.detail, version=exc.version),
        content_type=protocol.JSON_TYPE,
    )


@dataclass(frozen=True, slots=True)
class Looks:
    """The counts a watch was told: ``waits``, and ``findings`` (``None``: not asked, or, for findings,
    nothing probes here), with where they are now."""

    parking: Parking
    health: EncoderHealth | None
    waits: int | None
    findings: int | None

    @classmethod
    def asked(cls, request: web.Request) -> Looks | None:
        """The request's; ``None`` when it asked neither. A bad count is a ``400`` before anything waits."""
        waits, findings = param(request, "waits"), param(request, "findings")
        if waits is None and findings is None:
            return None
        moves = None if waits is None else protocol.parse_waits(waits)
        found = None if findings is None else protocol.parse_findings(findings)
        health = request.app.get(ENCODER_HEALTH)
        return cls(request.app[REGISTRY].parking, health, moves, None if health is None else found)

    @property
    def behind(self) -> bool:
        """Whether a count told has moved already (the watch is answered at once)."""
        health = self.health
        return (self.waits is not None and self.waits != self.parking.moves.count) or (
            self.findings is not None and health is not None and self.findings != health.findings.count
        )

    def encode(self, changes: Sequence[protocol.WatchedChange], version: int) -> bytes:
        """The reply, saying the counts asked for as they are now."""
        health = self.health
        return protocol.encode_watch(
            changes,
            version,
            waits=None if self.waits is None else self.parking.moves.count,
            findings=None if self.findings is None or health is None else health.findings.count,
        )


async def watch_with_looks(
    history: History, namespace: str, after: int, wait: float, match: Match | None, looks: Looks
) -> web.Response:
    """Answered at a change as any watch, or once a count told has moved: three waits raced."""
    waiting: list[Coroutine[Any, Any, None]] = []
    if looks.waits is not None:
        waiting.append(looks.parking.moved(looks.waits, wait))
    if looks.findings is not None and looks.health is not None:
        waiting.append(looks.health.findings.past(looks.findings, wait))
    told = asyncio.ensure_future(history.since(namespace, after, wait, match))
    looked = [asyncio.ensure_future(look) for look in waiting]
    try:
        await asyncio.wait((told, *looked), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (told, *looked):
            task.cancel()
        await asyncio.gather(told, *looked, return_exceptions=True)
    try:
        changes, version = (
            told.result() if not told.cancelled() else await history.since(namespace, after, 0, match)
        )
    except HistoryGone as exc:
        return gone(exc)
    return web.Response(body=looks.encode(changes, version), content_type=protocol.JSON_TYPE)
