"""What a face declares of each record kind it owns (:class:`KindSpec`), and what it counts of them
(:class:`KindFigures`).

The host knows no kind by name: a get's reply bytes, whether ``/watch`` and
the listings show a kind, whether its record is a set of members, how
``/watch`` shows its changes and the most records a namespace may hold of it
are each face's declaration (``Face.kinds``). The app builds one table of
them, :class:`KindTable`, from its faces when it is made (``appkeys.KIND_TABLE``).
What ``/metrics`` and the page count of a face's records in a namespace is the
face's too: per kind and role (``Face.figures``, giving :class:`KindFigures`),
and as named counts (``Face.counts``, each a :class:`NamespaceCount`: a field
of ``/namespaces`` and, when it names one, a ``/metrics`` gauge of its own).

This module sits on the host floor; it imports the store, the core and
``_names`` only, never a face.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.history import LoggedChange
from ..store import Record

if TYPE_CHECKING:
    from ..core.registry import Registry
    from .config import ServerConfig

__all__ = ["KindFigures", "KindSpec", "KindTable", "NamespaceCount"]


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One record kind, as the face that owns it declares it to the host."""

    name: str
    """The kind's name: a store key's part and a metric label (``_names.KIND_PATTERN``)."""
    encode: Callable[[Record], bytes]
    """A get's reply bytes for a record of this kind (cached per record version by ``fastpath.gets``)."""
    encode_object: Callable[[Record], bytes] | None = None
    """A ``form=object`` get's reply; ``None``: the kind has no such form."""
    listed: bool = True
    """Whether ``/watch`` and the namespace listings show records of this kind."""
    members: bool = False
    """Whether a record of this kind is a set of members (changed one member at a time by the store)."""
    describe_change: Callable[[LoggedChange], list[dict[str, Any]]] | None = None
    """How ``/watch`` shows a change of this kind: the JSON objects a watcher is told (none: the change is
    told to nobody, and the history does not keep it); ``None``: the generic rank-or-key form
    (``change_words``)."""
    cap: Callable[[ServerConfig], int | None] | None = None
    """The most records of this kind one namespace may hold under a config (``None``: no cap)."""


class KindTable(Mapping[str, KindSpec]):
    """Every kind an app's faces declare, by name (``appkeys.KIND_TABLE``): what the host asks of a kind."""

    __slots__ = ("_listed", "_specs")

    def __init__(self, specs: Iterable[KindSpec]) -> None:
        """A name declared twice is a mistake of the faces: ``ValueError``."""
        self._specs: dict[str, KindSpec] = {}
        for spec in specs:
            if spec.name in self._specs:
                raise ValueError(f"The record kind {spec.name!r} is declared twice")
            self._specs[spec.name] = spec
        self._listed = frozenset(name for name, spec in self._specs.items() if spec.listed)

    def __getitem__(self, name: str) -> KindSpec:
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def listed(self) -> frozenset[str]:
        """The kinds ``/watch`` and the listings show."""
        return self._listed

    def _spec(self, record: Record) -> KindSpec:
        spec = self._specs.get(record.key.kind)
        if spec is None:
            raise ValueError(f"No kind {record.key.kind!r} in the kind table")
        return spec

    def encode(self, record: Record) -> bytes:
        """A get's reply for ``record``, as its kind encodes it (what ``fastpath.gets`` caches per version)."""
        return self._spec(record).encode(record)

    def encode_object(self, record: Record) -> bytes:
        """A ``form=object`` get's reply for ``record``; ``ValueError`` for a kind without that form."""
        spec = self._spec(record)
        if spec.encode_object is None:
            raise ValueError(f"The kind {spec.name!r} has no form=object reply")
        return spec.encode_object(record)


@dataclass(frozen=True, slots=True)
class KindFigures:
    """One kind and role of one namespace, read for a scrape (``/metrics``) or the page."""

    kind: str
    role: str
    registered: int
    world_size: int | None
    oldest_wait: float
    """Seconds the longest-parked get for a rank of this kind and role has waited (0: none parked)."""


@dataclass(frozen=True, slots=True)
class NamespaceCount:
    """A count a face keeps of its records in each namespace: a field of ``/namespaces`` (and the page's),
    and, when :attr:`metric` names one, a ``/metrics`` gauge by namespace."""

    name: str
    """Its name: the field of a namespace in ``/namespaces`` (``wire.NamespaceSummary``)."""
    read: Callable[[Registry, str], Awaitable[int]]
    """Reads it for a namespace."""
    description: str | None = None
    """What the OpenAPI document says of the field."""
    metric: str | None = None
    """The name of its gauge in ``/metrics`` (``None``: none)."""
    help: str = ""
    """The gauge's help text."""
