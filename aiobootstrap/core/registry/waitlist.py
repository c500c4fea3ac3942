"""What the waiters of one key share (:class:`Waitlist`), and when a record answers a wait."""

from __future__ import annotations

import asyncio
import time

from ..._ranks import RankSet
from ...store import Record

__all__ = ["Waitlist", "fresh", "not_found"]


class Waitlist:
    """One key's waiters: the event they wait on (replaced, never cleared, once set), how many, and since when."""

    __slots__ = ("event", "incarnation", "record", "since", "waiters")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.waiters = 0
        self.since = time.monotonic()
        """When the first of its waiters parked (the key has had someone waiting since)."""
        self.record: Record | None = None
        """The newest record the feed delivered for the key while someone waited."""
        self.incarnation = ""
        """The store's incarnation when ``record`` came: a record of a newer one replaces it, whatever its version."""


def not_found(ranks: RankSet, found: dict[int, Record]) -> RankSet:
    """The ranks of ``ranks`` not in ``found`` (whose ranks are all in ``ranks``)."""
    # All found is the common answer, and the difference would sort every rank found.
    return RankSet() if len(found) == len(ranks) else ranks.without(found)


def fresh(record: Record | None, after: int) -> Record | None:
    """``record`` if it answers a wait for a version newer than ``after``."""
    return record if record is not None and record.version > after else None
