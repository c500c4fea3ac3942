"""Sets of ranks kept as ranges: what a batch names costs what its ranges cost.

A :class:`RankSet` is a sorted tuple of disjoint, non-adjacent inclusive
ranges. ``0-1048575`` is one range, not a million integers: parsing, counting,
membership (a binary search) and formatting never expand it. Only iteration
visits ranks one by one, lazily, and only a caller that wants them pays.

The spec grammar is the batch query's: comma-separated ranks and inclusive
ranges, ``0-3,8,10-11``, in any order, overlaps and repeats allowed. A rank
is read by the one rank rule (:func:`rank_value`, at most 18 ASCII digits),
the same for every route. Nothing here does I/O or knows HTTP.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Sequence

__all__ = ["MAX_RANK", "RankSet", "rank_value"]

MAX_RANK = 10**18 - 1
"""The largest rank: eighteen digits, the most a query parameter may spell.

One rule for every route (bodies, query parameters, deletions, batches): no
rank can be stored that a get would refuse.
"""

_MAX_DIGITS = len(str(MAX_RANK))


def rank_value(value: object) -> int | None:
    """The one rank rule, for a JSON value and a query parameter's text alike; ``None`` when not a rank."""
    if isinstance(value, str):
        return parse_int(value)
    # bool is an int subclass, and a JSON true is not a rank.
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_RANK:
        return value
    return None


def is_rank(value: object) -> bool:
    """A JSON value that is a rank: an integer from 0 to :data:`MAX_RANK` (a JSON ``true`` is not)."""
    return rank_value(value) is not None and not isinstance(value, str)


def parse_int(text: str) -> int | None:
    """Plain ASCII digits, at most 18 of them; ``None`` otherwise.

    ``int()`` would also take ``+3``, `` 3``, ``3_000`` and other scripts' digits.
    """
    if not text.isascii() or not text.isdigit() or len(text) > _MAX_DIGITS:
        return None
    return int(text)


_Range = tuple[int, int]


def _merged(ranges: Iterable[_Range]) -> tuple[_Range, ...]:
    """Sorted, disjoint, non-adjacent ranges covering exactly what ``ranges`` cover."""
    out: list[_Range] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            if last > out[-1][1]:
                out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return tuple(out)


class RankSet:
    """An immutable set of ranks, held as sorted disjoint inclusive ranges."""

    __slots__ = ("_count", "_firsts", "_ranges")

    def __init__(self, ranges: Iterable[_Range] = ()) -> None:
        """The ranks of the inclusive ``(first, last)`` ``ranges``, in any order, overlapping or not."""
        self._ranges = _merged(ranges)
        self._firsts = [first for first, _ in self._ranges]
        self._count = sum(last - first + 1 for first, last in self._ranges)

    @classmethod
    def from_ranks(cls, ranks: Iterable[int]) -> RankSet:
        """The set of ``ranks`` (any order, repeats allowed)."""
        ranges: list[_Range] = []
        for rank in sorted(set(ranks)):
            if ranges and rank == ranges[-1][1] + 1:
                ranges[-1] = (ranges[-1][0], rank)
            else:
                ranges.append((rank, rank))
        return cls._of(tuple(ranges))

    @classmethod
    def below(cls, count: int) -> RankSet:
        """The ranks ``0`` to ``count - 1`` (a world of ``count`` ranks), as one range."""
        return cls._of(((0, count - 1),) if count > 0 else ())

    @classmethod
    def parse(cls, spec: str, *, limit: int | None = None, name: str = "ranks") -> RankSet:
        """Read a spec such as ``0-3,8,10-11`` without expanding its ranges.

        Raises ``ValueError`` naming the ``name`` parameter when a part is not a
        rank or a range, or when the set holds more than ``limit`` ranks (the
        wire turns it into a ``400``).
        """
        ranges: list[_Range] = []
        for part in spec.split(","):
            first_text, dash, last_text = part.strip().partition("-")
            first = rank_value(first_text)
            last = rank_value(last_text) if dash else first
            if first is None or last is None or last < first:
                raise ValueError(f"Invalid {name} parameter: {part.strip()[:40]!r} is not a rank or a range.")
            ranges.append((first, last))
        ranks = cls(ranges)
        if limit is not None and len(ranks) > limit:
            raise ValueError(
                f"Invalid {name} parameter: it names {len(ranks)} ranks, and one request may name at most "
                f"{limit}; split the set into several requests."
            )
        return ranks

    @classmethod
    def _of(cls, ranges: tuple[_Range, ...]) -> RankSet:
        # Ranges already sorted, disjoint and non-adjacent: no merging.
        self = cls.__new__(cls)
        self._ranges = ranges
        self._firsts = [first for first, _ in ranges]
        self._count = sum(last - first + 1 for first, last in ranges)
        return self

    # -- reading -------------------------------------------------------

    @property
    def ranges(self) -> tuple[_Range, ...]:
        """The inclusive ``(first, last)`` ranges, ascending."""
        return self._ranges

    @property
    def first(self) -> int:
        """The smallest rank; ``ValueError`` when the set is empty."""
        if not self._ranges:
            raise ValueError("an empty rank set has no first rank")
        return self._ranges[0][0]

    @property
    def last(self) -> int:
        """The largest rank; ``ValueError`` when the set is empty."""
        if not self._ranges:
            raise ValueError("an empty rank set has no last rank")
        return self._ranges[-1][1]

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return bool(self._ranges)

    def __contains__(self, rank: object) -> bool:
        if not isinstance(rank, int):
            return False
        index = bisect.bisect_right(self._firsts, rank) - 1
        return index >= 0 and rank <= self._ranges[index][1]

    def __iter__(self) -> Iterator[int]:
        """The ranks, ascending, one at a time (a range is never expanded all at once)."""
        return itertools.chain.from_iterable(range(first, last + 1) for first, last in self._ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RankSet) and self._ranges == other._ranges

    def __hash__(self) -> int:
        return hash(self._ranges)

    def __repr__(self) -> str:
        return f"RankSet({str(self)!r})"

    def __str__(self) -> str:
        """The set as a spec (``0-3,8``): what :meth:`parse` reads back; empty for an empty set."""
        return self.format()

    def format(self, max_ranges: int | None = None) -> str:
        """The spec of the set, or of its first ``max_ranges`` ranges."""
        shown = self._ranges if max_ranges is None else self._ranges[:max_ranges]
        return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in shown)

    def head(self, count: int) -> list[int]:
        """The smallest ``count`` ranks (all of them when the set is smaller), ascending."""
        return list(itertools.islice(self, count))

    def chunks(self, size: int) -> Iterator[RankSet]:
        """The set cut, ascending, into consecutive sets of at most ``size`` ranks (lazily)."""
        if size < 1:
            raise ValueError("a chunk holds at least one rank")
        chunk: list[_Range] = []
        room = size
        for first, last in self._ranges:
            while first <= last:
                end = min(last, first + room - 1)
                chunk.append((first, end))
                room -= end - first + 1
                first = end + 1
                if room == 0:
                    yield RankSet._of(tuple(chunk))
                    chunk, room = [], size
        if chunk:
            yield RankSet._of(tuple(chunk))

    def select(self, ranks: Sequence[int]) -> list[slice]:
        """The slices of ascending ``ranks`` that fall in the set: a binary search per range, no
        membership test per rank (``items[part]`` for each part keeps the matching items in order)."""
        parts: list[slice] = []
        for first, last in self._ranges:
            start = bisect.bisect_left(ranks, first)
            stop = bisect.bisect_right(ranks, last, lo=start)
            if start < stop:
                parts.append(slice(start, stop))
        return parts

    # -- combining -----------------------------------------------------

    def without(self, ranks: Iterable[int]) -> RankSet:
        """This set less ``ranks`` (any iterable of ints, or another :class:`RankSet`)."""
        removed = ranks if isinstance(ranks, RankSet) else RankSet.from_ranks(ranks)
        if not removed or not self:
            return self
        out: list[_Range] = []
        cuts = removed._ranges
        index = 0
        for first, last in self._ranges:
            # Skip the cuts wholly before this range; they cannot touch the later ones either.
            while index < len(cuts) and cuts[index][1] < first:
                index += 1
            start = first
            probe = index
            while probe < len(cuts) and cuts[probe][0] <= last:
                cut_first, cut_last = cuts[probe]
                if cut_first > start:
                    out.append((start, cut_first - 1))
                start = max(start, cut_last + 1)
                if cut_last > last:
                    break
                probe += 1
            if start <= last:
                out.append((start, last))
        return RankSet._of(tuple(out))
