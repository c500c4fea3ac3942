"""What a face declares of each record kind it owns (:class:`KindSpec`), and what it counts of them
(:class:`KindFigures`).

The host knows no kind by name: a get's reply bytes, whether ``/watch`` and
the listings show a kind, whether its record is a set of members, how
``/watch`` shows its changes and the most records a namespace may hold of it
are each face's declaration (``Face.kinds``). The app builds one table of
them, ``{name: KindSpec}``, from its faces when it is made (``KIND_TABLE``).
What ``/metrics`` and the page count of a face's records in a namespace is the
face's too (``Face.figures``, giving :class:`KindFigures`).

This module sits on the host floor; it imports the store, the core and
``_names`` only, never a face.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..store import Record

if TYPE_CHECKING:
    from .config import ServerConfig

__all__ = ["KindFigures", "KindSpec", "KindTable", "kind_table"]


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
    describe_change: Callable[[Any], list[dict[str, Any]]] | None = None
    """How ``/watch`` shows a change of this kind; ``None``: the generic rank-or-key form."""
    cap: Callable[[ServerConfig], int | None] | None = None
    """The most records of this kind one namespace may hold under a config (``None``: no cap)."""


KindTable = Mapping[str, KindSpec]
"""Every kind the app's faces declare, by name."""


def kind_table(specs: Iterable[KindSpec]) -> dict[str, KindSpec]:
    """The table of ``specs`` by name; a name declared twice is a mistake of the faces (``ValueError``)."""
    table: dict[str, KindSpec] = {}
    for spec in specs:
        if spec.name in table:
            raise ValueError(f"The record kind {spec.name!r} is declared twice")
        table[spec.name] = spec
    return table


@dataclass(frozen=True, slots=True)
class KindFigures:
    """One kind and role of one namespace, read for a scrape (``/metrics``) or the page."""

    kind: str
    role: str
    registered: int
    world_size: int | None
    oldest_wait: float
    """Seconds the longest-parked get for a rank of this kind and role has waited (0: none parked)."""
