"""What a store keeps and tells: a record's :class:`Key`, the :class:`Record`, a :class:`Change` on the
feed, and a lease as read (:class:`LeaseState`); ``interface`` has the theory of operation.

A key, a record and a change are made on every write: each is a frozen
dataclass whose ``__init__`` sets its slots through the slots' own setters
(``_setters``), a third of what the frozen ``__init__``'s
``object.__setattr__`` per field costs; the instance stays as frozen.

A key names a record by rank (an integer from 0) or by *name* (``Key.named``):
any non-empty string of at most :data:`MAX_NAME_LENGTH` characters that is
valid Unicode text. Colons, slashes, spaces, newlines, quotes and
non-ASCII are all kept exactly, by every store: each keeps a name where a
rank cannot be (a ``str`` slot beside ``int`` ones in memory and in the
file store's tables, ``name`` in place of ``rank`` on a journal line, a
``:``-prefixed hash field in Redis, whose rank fields are all digits).
A lone surrogate is refused here (:func:`check_key_name`), as it is in a
role: it is no UTF-8, so neither Redis nor the journal could keep it.
Saying so to a client in its protocol's words (a ``400``) is the face's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._names import is_text

__all__ = [
    "MAX_NAME_LENGTH",
    "NO_RANK",
    "Change",
    "HeldLease",
    "Key",
    "LeaseState",
    "Record",
    "Target",
    "by_key",
    "check_key_name",
]

NO_RANK = -1
"""The ``rank`` of a named key: below every rank, so a name never stands for a rank."""

MAX_NAME_LENGTH = 1024
"""The longest name a key may have, in characters."""


def check_key_name(name: object) -> str:
    """``name`` if it can name a record; ``ValueError`` saying why not."""
    if not isinstance(name, str) or not name:
        raise ValueError("A record's name is a non-empty string.")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"A record's name is at most {MAX_NAME_LENGTH} characters, not {len(name)}.")
    if not is_text(name):
        raise ValueError("A record's name is not valid Unicode text (a lone surrogate).")
    return name


def _setters(cls: type, *fields: str) -> Any:
    """The slots' setters of a frozen dataclass's ``fields``: its ``__init__`` sets each at a third of the
    frozen ``object.__setattr__``'s cost (a key, a record and a change are made on every write)."""
    return tuple(cls.__dict__[name].__set__ for name in fields)


@dataclass(frozen=True, slots=True, init=False)
class Key:
    """Where a record lives: a rank's record, or a named one (:meth:`named`), of one kind and role, in one
    namespace. A rank's key has no ``name``; a named key's ``rank`` is :data:`NO_RANK`."""

    namespace: str
    kind: str
    role: str
    rank: int
    name: str | None = None

    def __init__(self, namespace: str, kind: str, role: str, rank: int, name: str | None = None) -> None:
        set_namespace, set_kind, set_role, set_rank, set_name = _KEY
        set_namespace(self, namespace)
        set_kind(self, kind)
        set_role(self, role)
        set_rank(self, rank)
        set_name(self, name)

    @classmethod
    def named(cls, namespace: str, kind: str, role: str, name: str) -> Key:
        """The key of the record named ``name`` (``ValueError`` when it cannot be one: ``check_key_name``)."""
        return cls(namespace, kind, role, NO_RANK, check_key_name(name))


def by_key(record: Record) -> tuple[str, int]:
    """The order of one table's records (a ``sort`` key): ranks first, by rank, then names, by name."""
    key = record.key
    return key.name or "", key.rank


@dataclass(frozen=True, slots=True, init=False)
class Record:
    """A stored record, stamped by its store."""

    key: Key
    value: dict[str, Any]
    """The JSON object registered under the key, kept whole (the face that owns the kind reads its fields)."""
    version: int
    """The namespace's version this write took."""
    registered_at: float
    """Wall-clock time of the write (``time.time()`` of the process that made it)."""

    def __init__(self, key: Key, value: dict[str, Any], version: int, registered_at: float) -> None:
        set_key, set_value, set_version, set_at = _RECORD
        set_key(self, key)
        set_value(self, value)
        set_version(self, version)
        set_at(self, registered_at)

    @property
    def rank(self) -> int:
        """The key's rank (:data:`NO_RANK` for a named record)."""
        return self.key.rank

    @property
    def name(self) -> str | None:
        """The key's name; ``None`` for a rank's record."""
        return self.key.name


@dataclass(frozen=True, slots=True, init=False)
class Change:
    """One change a store applied, as its feed announces it."""

    key: Key
    version: int
    """The version the change took."""
    record: Record | None = None
    """The record written, when the store has it at hand; ``None`` for a deletion,
    or when only the key travelled (a feed between processes carries no values)."""
    deleted: bool = False
    member: str | None = None
    """A set record's member the change added (``"+"`` and it) or removed (``"-"`` and it): every store
    tells it with each change :meth:`Store.set_member` makes, and with a member's removal when its lease
    ends; ``None`` for a put or a delete of a whole record."""

    def __init__(
        self,
        key: Key,
        version: int,
        record: Record | None = None,
        deleted: bool = False,
        member: str | None = None,
    ) -> None:
        set_key, set_version, set_record, set_deleted, set_member = _CHANGE
        set_key(self, key)
        set_version(self, version)
        set_record(self, record)
        set_deleted(self, deleted)
        set_member(self, member)


_KEY = _setters(Key, "namespace", "kind", "role", "rank", "name")
_RECORD = _setters(Record, "key", "value", "version", "registered_at")
_CHANGE = _setters(Change, "key", "version", "record", "deleted", "member")


Target = tuple[Key, str | None]
"""A record a lease holds: a per-rank record's key (``None``), or a set record's key and one member."""

HeldLease = tuple[str, float, float]
"""A target's lease as :meth:`Store.leases_of` reads it: its id, its seconds remaining and its TTL."""


@dataclass(frozen=True, slots=True)
class LeaseState:
    """A lease as a store reads it (SPEC section 9; the lease model is ``store.leases``)."""

    id: str
    namespace: str
    ttl: float
    remaining: float
    """Seconds until it expires unless kept alive."""
    records: tuple[Target, ...] = ()
