"""The file store's changes on their way to disk: what they hold meanwhile, and how their failures are logged.

Changes queued but not yet on disk are *staged*: they hold their versions and
the room they take (a new rank, a new namespace), so two writes in flight can
never both take the last place under a limit, nor the same version. A write
that fails gives its room back; its version is never reused by a write that
succeeds before it (counters only grow), so nothing can be acknowledged twice
under one version.

While writes keep failing (a full disk, a lost mount) the log says so at
once, then at most once a minute with a count of the rest, and once more
when writes succeed again: a storm of registrations against a broken disk
is a line a minute, not one per registration. Every caller of a change that
failed hears why, in one sentence (:func:`not_saved`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from dataclasses import dataclass, field

from ..exceptions import StateFileError
from .journal import reason
from .records import Key, Record
from .tables import Slot, Tables

__all__ = ["FailureLog", "Pending", "Staged", "not_saved"]

log = logging.getLogger("aiobootstrap")

_FAILURE_LOG_SECONDS = 60.0
"""While writes keep failing, one error line per this many seconds, with a count of the rest."""

_Group = tuple[str, str, str]
"""A namespace, kind and role: one table of ranks (and names)."""


@dataclass(slots=True)
class Pending:
    """One change queued for the journal: its line, and the future its caller awaits."""

    key: Key
    version: int
    line: bytes
    record: Record | None
    """The record a put writes; ``None`` for a delete."""
    done: asyncio.Future[Record | None]
    lease_line: bool = False
    """A lease's line (granted, ended, a member held): no record changes when it lands."""
    member: str | None = None
    """A set record's member the put added (``+M``) or removed (``-M``), told on the feed with it."""


@dataclass(slots=True)
class Staged:
    """What the puts queued but not yet on disk hold: versions, and room under the limits."""

    versions: dict[str, int] = field(default_factory=dict)
    ranks: dict[_Group, collections.Counter[Slot]] = field(default_factory=dict)
    """The slots (ranks, names: ``tables.Slot``) each table's puts in flight hold."""
    namespaces: collections.Counter[str] = field(default_factory=collections.Counter)

    def ranks_of(self, key: Key) -> collections.Counter[Slot] | tuple[()]:
        """The slots held in ``key``'s table (its namespace, kind and role)."""
        return self.ranks.get((key.namespace, key.kind, key.role), ())

    def stamp(self, namespace: str, tables: Tables) -> int:
        """The next version of ``namespace``: above what landed and what is staged, and held."""
        version = max(tables.version(namespace), self.versions.get(namespace, 0)) + 1
        self.versions[namespace] = version
        return version

    def hold(self, key: Key) -> None:
        """Hold the room a put of ``key`` takes (its rank, its namespace) until :meth:`release`."""
        group = (key.namespace, key.kind, key.role)
        self.ranks.setdefault(group, collections.Counter())[key.rank if key.name is None else key.name] += 1
        self.namespaces[key.namespace] += 1

    def release(self, key: Key, tables: Tables, *, put: bool) -> None:
        """A change of ``key`` landed or failed: give back its room (a put's) and its version once landed ones pass it."""
        if put:
            group = (key.namespace, key.kind, key.role)
            ranks = self.ranks[group]
            slot = key.rank if key.name is None else key.name
            ranks[slot] -= 1
            if not ranks[slot]:
                del ranks[slot]
                if not ranks:
                    del self.ranks[group]
            self.namespaces[key.namespace] -= 1
            if not self.namespaces[key.namespace]:
                del self.namespaces[key.namespace]
        if self.versions.get(key.namespace, 0) <= tables.version(key.namespace):
            self.versions.pop(key.namespace, None)


class FailureLog:
    """Logs failed writes without flooding: the first at once, then one line a minute, then the recovery."""

    def __init__(self) -> None:
        self._failing = False
        self._last = 0.0
        self._unlogged = 0

    def failed(self, path: str, changes: int, exc: Exception) -> None:
        now = time.monotonic()
        if self._failing and now - self._last < _FAILURE_LOG_SECONDS:
            self._unlogged += changes
            return
        more = f" ({self._unlogged} more change(s) failed since the last line)" if self._unlogged else ""
        log.error(
            "state file %s: cannot write %d change(s): %s%s",
            path,
            changes,
            exc,
            more,
            exc_info=not isinstance(exc, OSError),
        )
        self._failing, self._last, self._unlogged = True, now, 0

    def recovered(self, path: str) -> None:
        if self._failing:
            more = f" ({self._unlogged} more change(s) failed meanwhile)" if self._unlogged else ""
            log.warning("state file %s: writes succeed again%s", path, more)
            self._failing, self._unlogged = False, 0


def not_saved(exc: Exception) -> StateFileError:
    """What the caller of a change the journal could not take hears (``exc``: why it could not)."""
    if isinstance(exc, StateFileError):
        why = exc.detail.removesuffix(".")
    else:
        why = reason(exc) if isinstance(exc, OSError) else type(exc).__name__
    return StateFileError(
        f"The server could not save this change to its state file ({why}); nothing was changed."
    )
