"""The Redis feed in the stream's own order, for a listener that needs every change in version order.

The feed's listener (the registry) hears this process's own writes when
their replies return, ahead of the stream: quick wakes, but out of the
stream's order by up to one write. A history of changes cannot take that
(a watcher answered in between would miss the earlier change), so the
*ordered tap* hears every entry of the stream, this process's own included,
in the stream's order, which is each namespace's version order.

An entry whose key has a write of this process under way waits, and every
entry after it, until that write returns: the write may be the entry's own,
and then the tap hands on its record (a set record's new members are how a
history tells which URL changed). A write's record is kept until its entry
arrives (the last few thousand). So the tap runs at most one local write
behind the stream, and never out of its order.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Collection, Sequence

from ..interface import Change, ChangeListener, Record

__all__ = ["OrderedTap"]

logger = logging.getLogger("aiobootstrap")

_RECORDS_KEPT = 4096
"""Records of this process's writes kept for their stream entries; the oldest go first."""


class OrderedTap:
    """Every change of the stream, in its order, to ``listener``."""

    def __init__(self, listener: ChangeListener) -> None:
        self._listener = listener
        self._queue: collections.deque[Change] = collections.deque()
        self._records: dict[tuple[str, int], Record] = {}

    def entries(self, changes: Sequence[Change], in_flight: Collection[object]) -> None:
        """The reader read ``changes`` (key only), in the stream's order."""
        self._queue.extend(changes)
        self.flush(in_flight)

    def wrote(self, change: Change, in_flight: Collection[object]) -> None:
        """A write of this process returned: keep its record for its entry, and let the queue go on."""
        if change.record is not None:
            records = self._records
            records[(change.key.namespace, change.version)] = change.record
            if len(records) > _RECORDS_KEPT:
                del records[next(iter(records))]
        self.flush(in_flight)

    def flush(self, in_flight: Collection[object]) -> None:
        """Hand on the entries at the front whose key has no write of this process under way."""
        queue, records = self._queue, self._records
        ready: list[Change] = []
        while queue and queue[0].key not in in_flight:
            change = queue.popleft()
            record = records.pop((change.key.namespace, change.version), None)
            ready.append(
                change if record is None else Change(change.key, change.version, record, change.deleted)
            )
        if ready:
            try:
                self._listener.changed(ready)
            except Exception:
                logger.exception("The ordered change listener failed")

    def resync(self) -> None:
        """The stream skipped entries, or the reader restarted: what is queued no longer follows on."""
        self._queue.clear()
        self._records.clear()
        try:
            self._listener.resync()
        except Exception:
            logger.exception("The ordered change listener failed to resync")
