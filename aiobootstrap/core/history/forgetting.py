"""Which namespaces the store forgot and since when, and what the logs freed with them vouched for.

A namespace emptied (its last record deleted) is forgotten by the store; its
log is freed too, but not at once: a watcher between two polls (its consumer
busy with the last change) would come back to a ``410`` for a namespace that
merely emptied and filled again. So a forgotten namespace's log is kept for
``grace`` seconds, and at most ``kept`` of them at once (the oldest freed
first, whatever their age): churn holds a bounded amount of history. A freed
log leaves a *tombstone*, its newest version, where the namespace's next log
starts (a watcher from before it is told ``410``, never told nothing); past
:data:`MAX_TOMBSTONES` the oldest is folded into the floor of every new log.
"""

from __future__ import annotations

import collections
from collections.abc import Collection, Iterator

__all__ = ["FORGOTTEN_GRACE", "FORGOTTEN_KEPT", "MAX_TOMBSTONES", "Forgetting"]

FORGOTTEN_GRACE = 60.0
"""Seconds a forgotten namespace's log is kept for a watcher coming back to it."""
FORGOTTEN_KEPT = 1024
"""Forgotten namespaces' logs kept at once, at most."""
MAX_TOMBSTONES = 4096
"""Freed namespaces whose last version is kept; past it the oldest is folded into the floor of new logs.

About 100 bytes each (a name, a version, a dict slot): 0.4 MiB at most. A bound set by the
count of namespaces ever freed was memory that churn kept (65,536 of them: 6.7 MiB that
40,000 namespaces made and forgotten left behind); the recent ones, which a watcher between
two polls may come back to, are the ones kept."""


class Forgetting:
    """The history's bookkeeping of forgotten namespaces (see the module's notes)."""

    def __init__(self, *, grace: float = FORGOTTEN_GRACE, kept: int = FORGOTTEN_KEPT) -> None:
        self.grace = grace
        self.kept = kept
        self.emptied: set[str] = set()
        """Namespaces a delete touched since the store was last asked which hold records."""
        self.forgotten: collections.OrderedDict[str, float] = collections.OrderedDict()
        """Namespaces the store forgot, oldest first, with when that was seen (the loop's clock)."""
        self.tombstones: dict[str, int] = {}

    def floor(self, namespace: str, floor: int) -> int:
        """A new log's floor: at least where the namespace's freed log left off."""
        return max(floor, self.tombstones.get(namespace, floor))

    def revived(self, namespace: str) -> None:
        """A change came for ``namespace``: it holds records again (an emptying one is seen again by its delete)."""
        self.forgotten.pop(namespace, None)

    def seen(self, emptied: Collection[str], live: Collection[str], now: float) -> None:
        """The store says which namespaces hold records (``live``): the ``emptied`` others are forgotten from ``now``."""
        for name in emptied:
            if name not in live:
                self.forgotten.pop(name, None)
                self.forgotten[name] = now

    def due(self, now: float) -> Iterator[str]:
        """The forgotten namespaces whose logs are to be freed now, oldest first (each taken off the list)."""
        forgotten = self.forgotten
        while forgotten:
            name, since = next(iter(forgotten.items()))
            if len(forgotten) <= self.kept and since + self.grace > now:
                return
            del forgotten[name]
            yield name

    def next_due(self) -> float | None:
        """When the oldest forgotten log is due (the loop's clock); ``None`` when none is waiting."""
        return None if not self.forgotten else next(iter(self.forgotten.values())) + self.grace

    def freed(self, namespace: str, high: int) -> int | None:
        """Note the freed log's newest version; returns a tombstone's version folded away, if one was."""
        self.tombstones[namespace] = high
        if len(self.tombstones) <= MAX_TOMBSTONES:
            return None
        oldest = next(iter(self.tombstones))
        return self.tombstones.pop(oldest)

    def clear(self) -> None:
        """After a resync: every log is made at the store's version, above every forgotten one."""
        self.tombstones.clear()
        self.forgotten.clear()
