"""Who is parked: the count of parked waits, by namespace, and the task of each.

The registry's bookkeeping of its waiters, apart from its waiting: the limit
(``max_waiters``) is checked here as a wait parks, and a stopping server reads
the tasks (in the order they parked) to answer them itself. Pure asyncio.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from .exceptions import TooManyWaiters

__all__ = ["Parking"]


class Parking:
    """The parked waits of one registry."""

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self.count = 0
        # In order of parking: waiters cancelled in that order leave each event's
        # list of waiters from its front (a thousand on one key cost no more than one each).
        self._tasks: dict[asyncio.Task[Any], None] = {}
        self._by_namespace: collections.Counter[str] = collections.Counter()
        self.watching = 0
        """Watches held (``_history``): they count against the limit, but a stop wakes them itself."""

    @property
    def tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks of the waits parked now, in the order they parked (a task parks one wait at a time)."""
        return list(self._tasks)

    def in_namespace(self, namespace: str) -> int:
        return self._by_namespace[namespace]

    def namespaces(self) -> list[str]:
        return list(self._by_namespace)

    def park(self, namespace: str) -> None:
        """Count the current task's wait, or refuse it with :class:`TooManyWaiters` at the limit."""
        self._check()
        self.count += 1
        self._by_namespace[namespace] += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks[task] = None

    def unpark(self, namespace: str) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.pop(task, None)
        self.count -= 1
        self._by_namespace[namespace] -= 1
        if not self._by_namespace[namespace]:
            del self._by_namespace[namespace]

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
