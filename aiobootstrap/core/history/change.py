"""One change as the watch history keeps it: what the store changed, under which key, and no value.

A store's :class:`~aiobootstrap.store.Change` holds its key and, when the
writer had it at hand, its record; the history keeps neither, only the
parts of the key a watcher filters by and the member a set record's change
added or removed (``Change.member``, which every store tells). How a watcher
is shown a change (``GET /watch``'s JSON) is the server's, per kind: the
core knows no wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...store import Change

__all__ = ["LoggedChange", "Op", "logged"]

Op = Literal["put", "delete"]


@dataclass(slots=True)
class LoggedChange:
    """One change of a namespace: a record put or deleted, or a set record's member added or removed.

    ``op`` is ``"put"`` (a record written, or a member added) or ``"delete"``
    (a record deleted, or a member removed). ``kind``, ``role``, ``rank`` and
    ``name`` are the key's (``name`` ``None`` for a rank's record; ``rank``
    ``NO_RANK`` for a named one); ``member`` the set record's member the change
    added or removed, ``None`` for a change of a whole record. ``version`` is the
    namespace's version the change took. Never changed once made.
    """

    op: Op
    kind: str
    version: int
    role: str
    rank: int
    name: str | None = None
    member: str | None = None


def logged(change: Change) -> LoggedChange:
    """What the history keeps of a store's ``change``."""
    key, marked = change.key, change.member
    if marked is None:
        op: Op = "delete" if change.deleted else "put"
        return LoggedChange(op, key.kind, change.version, key.role, key.rank, key.name)
    op = "put" if marked[:1] == "+" else "delete"
    return LoggedChange(op, key.kind, change.version, key.role, key.rank, key.name, marked[1:])
