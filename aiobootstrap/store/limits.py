"""The limits a store keeps, and each refusal in its one sentence.

Every store checks its limits atomically with the write that would pass them
(see ``interface``): the memory and file stores in ``tables``, the Redis
store in its scripts, the leases in ``leases`` and ``redis/leases``. However
a store counts, a refusal reads the same: each is written here once, as the
exception to raise, with the count the store found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..exceptions import TooManyLeases, TooManyNamespaces, TooManyOfKind, TooManyRanks

__all__ = [
    "StoreLimits",
    "lease_share",
    "too_many_leases",
    "too_many_leases_in",
    "too_many_members",
    "too_many_namespaces",
    "too_many_ranks",
    "too_many_roles",
]


@dataclass(frozen=True, slots=True)
class StoreLimits:
    """The limits a store enforces atomically with each write (``None``: no limit)."""

    max_ranks: int | None = None
    """Distinct ranks one (namespace, kind, role) may hold; a replacement never needs room."""
    max_namespaces: int | None = None
    """Namespaces that may hold records at once."""
    max_roles: int | None = None
    """Distinct roles one (namespace, kind) may hold records under; a write to a role held needs no room."""
    max_leases: int | None = None
    """Leases that may be held at once, every namespace together; one namespace holds at most its share
    (:func:`lease_share`)."""
    kind_caps: Mapping[str, int] = field(default_factory=dict, hash=False)
    """The most records of a kind one (namespace, role) may hold, by kind (each face declares its own kinds'
    caps, ``KindSpec.cap``). A record of a capped kind counts against its kind's cap, in place of
    ``max_ranks``; a replacement never needs room."""

    def rank_cap(self, kind: str) -> int | None:
        """The most records one (namespace, ``kind``, role) table may hold: the kind's cap, else ``max_ranks``."""
        cap = self.kind_caps.get(kind)
        return self.max_ranks if cap is None else cap

    def refusal(self, kind: str, held: int) -> TooManyRanks:
        """The refusal of a new record of ``kind`` in a table holding ``held`` (at :meth:`rank_cap`)."""
        cap = self.kind_caps.get(kind)
        return too_many_ranks(held) if cap is None else TooManyOfKind(kind, cap, held)


def too_many_ranks(held: int) -> TooManyRanks:
    """A write refused under ``max_ranks``."""
    return TooManyRanks(
        f"The server already stores {held} distinct ranks, its limit; "
        "unregister one, or give the server a world size or a higher rank limit."
    )


def too_many_roles(held: int) -> TooManyRanks:
    """A write refused under ``max_roles``."""
    return TooManyRanks(
        f"The namespace already holds records of this kind under {held} distinct roles, its limit "
        "(--max-roles); unregister a role's last rank before using another."
    )


def too_many_namespaces(held: int) -> TooManyNamespaces:
    """A write refused under ``max_namespaces``."""
    return TooManyNamespaces(
        f"The server already holds records in {held} namespaces, its limit "
        "(--max-namespaces); a namespace is freed when its last record is deleted."
    )


def too_many_leases(held: int) -> TooManyLeases:
    """A grant refused under ``max_leases``."""
    return TooManyLeases(
        f"The server already holds {held} leases, its limit (--max-leases); "
        "revoke one before granting another."
    )


def lease_share(max_leases: int, held: int, held_here: int) -> int:
    """The most leases one namespace may hold, holding ``held_here`` of the ``held`` every namespace holds:
    half of the room the other namespaces leave (at least one).

    So one namespace (an open one, granting to anyone without a token) never takes more than half of
    ``--max-leases``, and a namespace holding none finds room while any is left: ``k`` namespaces together
    hold at most ``1 - 2**-k`` of it. One store counts both figures atomically with the grant.
    """
    return max(1, (max_leases - (held - held_here)) // 2)


def too_many_leases_in(namespace: str, held_here: int, share: int) -> TooManyLeases:
    """A grant refused under the namespace's share of ``max_leases`` (:func:`lease_share`)."""
    return TooManyLeases(
        f"The namespace {namespace} already holds {held_here} leases, its share of --max-leases ({share}: "
        "half of what the other namespaces leave); revoke one before granting another."
    )


def too_many_members(held: int) -> TooManyRanks:
    """A member added to a set record of ``MAX_MEMBERS`` (``members.with_member``)."""
    return TooManyRanks(
        f"The list already holds {held} entries, its limit; remove one before adding another."
    )
