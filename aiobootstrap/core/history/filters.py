"""A watch's filter as the core knows it, and what is parked by filter: whom a change concerns, found by index.

A :class:`Filter` is a :data:`Match` (a watcher's kind, role and ranks) that
says what it selects, so that :class:`Parked` can index it: by each rank of
a small rank set, else by its role, else among the few it scans. A change
then costs the watches it may concern, not every watch of its namespace:
3,000 watches parked with filters of their own once cut a namespace's
registrations from 774 a second to 10, each change waking them all to look
(issue 41, item 11). Any other :data:`Match` is scanned, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..._ranks import RankSet
from .change import LoggedChange

__all__ = ["INDEXED_RANKS", "Filter", "Match", "Parked", "every"]

Match = Callable[[LoggedChange], bool]
"""A watcher's filter: which changes it wants."""

INDEXED_RANKS = 64
"""A filter naming at most this many ranks is indexed by each; a wider one is indexed by its role, or scanned."""

_T = TypeVar("_T", bound=Hashable)


def every(change: LoggedChange) -> bool:
    """The filter of a watch that gave none."""
    return True


@dataclass(frozen=True, slots=True)
class Filter:
    """``GET /watch``'s ``kind``, ``role`` and ``ranks`` (each ``None`` when not given), as a :data:`Match`.

    A set record's member (an encoder URL) or a named record's change (a prefill rank, a Mooncake key) has no
    role or rank a watcher names: only a kind filter selects it.
    """

    kind: str | None = None
    role: str | None = None
    ranks: RankSet | None = None

    def __call__(self, change: LoggedChange) -> bool:
        if self.kind is not None and change.kind != self.kind:
            return False
        if change.member is not None or change.name is not None:
            return self.role is None and self.ranks is None
        if self.role is not None and change.role != self.role:
            return False
        return self.ranks is None or change.rank in self.ranks


class Parked(Generic[_T]):
    """Items (parked watches, or groups of them) each with its :data:`Match`, indexed when it is a :class:`Filter`."""

    __slots__ = ("_by_rank", "_by_role", "_matches", "_scanned")

    def __init__(self) -> None:
        self._matches: dict[_T, Match] = {}
        self._by_rank: dict[int, dict[_T, None]] = {}
        self._by_role: dict[str, dict[_T, None]] = {}
        self._scanned: dict[_T, None] = {}

    def __len__(self) -> int:
        return len(self._matches)

    def __iter__(self) -> Iterator[_T]:
        return iter(list(self._matches))

    def add(self, item: _T, match: Match) -> None:
        self._matches[item] = match
        for bucket in self._buckets(match):
            bucket[item] = None

    def remove(self, item: _T) -> bool:
        """Take ``item`` out; whether it was in."""
        match = self._matches.pop(item, None)
        if match is None:
            return False
        for bucket in self._buckets(match, make=False):
            bucket.pop(item, None)
        if isinstance(match, Filter):  # no empty bucket left behind
            if match.ranks is not None and len(match.ranks) <= INDEXED_RANKS:
                for rank in match.ranks:
                    if not self._by_rank.get(rank, True):
                        del self._by_rank[rank]
            elif match.role is not None and not self._by_role.get(match.role, True):
                del self._by_role[match.role]
        return True

    def matching(self, changes: Sequence[LoggedChange]) -> list[_T]:
        """The items whose match accepts one of ``changes``, each once."""
        found: dict[_T, None] = {}
        matches = self._matches
        for change in changes:
            if change.name is None and change.member is None:
                for bucket in (self._by_rank.get(change.rank), self._by_role.get(change.role)):
                    if bucket:
                        for item in bucket:
                            if item not in found and matches[item](change):
                                found[item] = None
            for item in self._scanned:
                match = matches[item]
                if item not in found and (match is every or match(change)):
                    found[item] = None
        return list(found)

    def _buckets(self, match: Match, *, make: bool = True) -> list[dict[_T, None]]:
        """Where ``match``'s item is kept (``make``: the buckets made when missing)."""
        if isinstance(match, Filter):
            if match.ranks is not None and len(match.ranks) <= INDEXED_RANKS:
                by_rank = self._by_rank
                if make:
                    return [by_rank.setdefault(rank, {}) for rank in match.ranks]
                return [bucket for rank in match.ranks if (bucket := by_rank.get(rank)) is not None]
            if match.role is not None:
                if make:
                    return [self._by_role.setdefault(match.role, {})]
                bucket = self._by_role.get(match.role)
                return [] if bucket is None else [bucket]
        return [self._scanned]
