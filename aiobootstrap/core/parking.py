"""Who is parked: the count of parked waits, by namespace and by rank, and the task of each.

The registry's bookkeeping of its waiters, apart from its waiting: the limit
(``max_waiters``) is checked here as a wait parks, and a stopping server reads
the tasks (in the order they parked) to answer them itself. Pure asyncio.

A wait parks on one rank (a get), on a :class:`~._ranks.RankSet` (a batch
get, on the ranks it is missing), or on a named record (counted in its
namespace and against the limit, on no rank). Parking one costs a dict write or two
whatever its set: the set is kept whole, as ranges, and only a reader of the
counts (:meth:`Parking.by_rank`, for ``/ranks``) walks the ranges, at a cost
that grows with the waits parked on that kind and role, not with the ranks.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from typing import Any

from .._ranks import RankSet
from ..exceptions import TooManyWaiters
from .tally import Tally

__all__ = ["Parked", "Parking"]

_Place = tuple[str, str, str]
"""A namespace, a kind and a role."""


class Parked:
    """One parked wait: where, on which ranks (a batch's shrink as they arrive), and its task."""

    __slots__ = ("namespace", "place", "rank", "ranks", "task")

    def __init__(self, place: _Place, rank: int | None, ranks: RankSet | None) -> None:
        self.place = place
        self.namespace = place[0]
        self.rank = rank
        self.ranks = ranks
        """A batch wait's ranks; the registry narrows it as ranks arrive (one assignment)."""
        self.task = asyncio.current_task()


class Parking:
    """The parked waits of one registry."""

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self.count = 0
        # In order of parking: waiters cancelled in that order leave each event's
        # list of waiters from its front (a thousand on one key cost no more than one each).
        self._tasks: dict[asyncio.Task[Any], None] = {}
        self._by_namespace: collections.Counter[str] = collections.Counter()
        self._on_rank: dict[_Place, collections.Counter[int]] = {}
        self._on_sets: dict[_Place, dict[Parked, None]] = {}
        self.watching = 0
        """Watches held (``_history``): they count against the limit, but a stop wakes them itself."""
        self.wait_changes = Tally("the waits parked or gone")
        """Waits parked or gone so far: a reader of the counts that saw this many has nothing new to read."""
        self._closed = False

    @property
    def tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks of the waits parked now, in the order they parked (a task parks one wait at a time)."""
        return list(self._tasks)

    def in_namespace(self, namespace: str) -> int:
        return self._by_namespace[namespace]

    def namespaces(self) -> list[str]:
        return list(self._by_namespace)

    def by_rank(self, namespace: str, kind: str, role: str) -> list[tuple[RankSet, int]]:
        """The waits parked on each rank of one kind and role: ranks with as many waits grouped in one set,
        only ranks with waits, in order of their first rank."""
        place = (namespace, kind, role)
        # A sweep over the edges of every wait's ranges: +1 where one starts, -1 past its end.
        edges: collections.Counter[int] = collections.Counter()
        for rank, waits in self._on_rank.get(place, {}).items():
            edges[rank] += waits
            edges[rank + 1] -= waits
        for parked in self._on_sets.get(place, {}):
            for first, last in parked.ranks.ranges if parked.ranks is not None else ():
                edges[first] += 1
                edges[last + 1] -= 1
        runs: dict[int, list[tuple[int, int]]] = {}
        waits = 0
        for here, after in itertools.pairwise(sorted(edges)):
            waits += edges[here]
            if waits > 0:
                runs.setdefault(waits, []).append((here, after - 1))
        counted = [(RankSet(ranges), waits) for waits, ranges in runs.items()]
        return sorted(counted, key=lambda each: each[0].first)

    def park(self, namespace: str, kind: str, role: str, ranks: int | str | RankSet) -> Parked:
        """Count the current task's wait on ``ranks`` (one rank, a batch's set, or one named record's name:
        counted, but on no rank), or refuse it with :class:`TooManyWaiters` at the limit."""
        self._check()
        place = (namespace, kind, role)
        if isinstance(ranks, int):
            parked = Parked(place, ranks, None)
            self._on_rank.setdefault(place, collections.Counter())[ranks] += 1
        elif isinstance(ranks, str):
            parked = Parked(place, None, None)
        else:
            parked = Parked(place, None, ranks)
            self._on_sets.setdefault(place, {})[parked] = None
        self.count += 1
        self._by_namespace[namespace] += 1
        self.wait_changes.step()
        if parked.task is not None:
            self._tasks[parked.task] = None
        return parked

    def unpark(self, parked: Parked) -> None:
        if parked.task is not None:
            self._tasks.pop(parked.task, None)
        self.count -= 1
        _drop(self._by_namespace, parked.namespace)
        self.wait_changes.step()
        place = parked.place
        if parked.rank is not None:
            on_rank = self._on_rank[place]
            _drop(on_rank, parked.rank)
            if not on_rank:
                del self._on_rank[place]
        elif parked.ranks is not None:
            on_sets = self._on_sets[place]
            del on_sets[parked]
            if not on_sets:
                del self._on_sets[place]

    async def moved(self, since: int, timeout: float) -> None:
        """Return once :attr:`wait_changes` is past ``since``, after ``timeout`` s, or at :meth:`close`.

        For a reader that follows the counts (the page) without asking again every few seconds.
        """
        if not self._closed:
            await self.wait_changes.past(since, timeout)

    def close(self) -> None:
        """Let every :meth:`moved` reader go: the server is stopping."""
        self._closed = True
        self.wait_changes.step()

    def hold(self) -> None:
        """Count a watch against the limit, or refuse it with :class:`TooManyWaiters`; :meth:`release` it after."""
        self._check()
        self.watching += 1

    def release(self) -> None:
        self.watching -= 1

    def _check(self) -> None:
        held = self.count + self.watching
        if self._limit is not None and held >= self._limit:
            raise TooManyWaiters(f"The server already holds {held} waiting requests, its limit; retry later.")


def _drop(counter: collections.Counter[Any], key: Any) -> None:
    counter[key] -= 1
    if not counter[key]:
        del counter[key]
