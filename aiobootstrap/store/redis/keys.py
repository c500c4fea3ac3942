"""The Redis store's key schema, and how a record is kept in it.

Every key sits under one hash tag, ``{prefix}``, so all of a registry's keys
live in one slot and the scripts stay valid on a cluster:

=================================  ======  ================================================
``{P}:incarnation``                string  the store's incarnation id (the boot id)
``{P}:seq``                        string  changes applied so far, all namespaces together
``{P}:floor``                      string  above every version of a forgotten namespace
``{P}:versions``                   hash    namespace -> its latest version (namespaces holding records)
``{P}:counts``                     hash    namespace -> how many records it holds
``{P}:roles``                      hash    ``NS:KIND`` -> how many roles hold records of it
``{P}:feed``                       stream  one entry per change: seq, key, version, op; never a value
``{P}:records:NS:KIND:ROLE``       hash    field -> ``"VERSION REGISTERED_AT JSON"``
``{P}:leases``                     hash    lease id -> ``"NS TTL"`` (its length: the lease cap's count)
``{P}:lease_counts``               hash    namespace -> the leases it holds (its share, ``limits.lease_share``)
``{P}:deadlines``                  zset    lease id, scored by its deadline (ms, Redis' clock)
``{P}:owners``                     hash    target -> the lease holding it (``lease_lua`` says what a target is)
``{P}:held:ID``                    set     the targets lease ``ID`` holds
=================================  ======  ================================================

Namespaces and kinds hold no colon and the role comes last, so two keys
never share a name. The rank table's length is the rank cap's count, and
``{P}:counts``'s length is the namespace cap's.

A record's *field* in its table (:func:`field`) is its rank in decimal
(``7``), or, for a named record, ``:`` and its name in UTF-8
(``:mooncake/ram/10.0.0.1:1234``): a rank's field is all digits, so a name
(``:7``) never takes a rank's place, and a hash field holds any bytes. The
same field is the feed's ``i`` and a lease target's fourth element
(``lease_lua``), so every script handles a name as it handles a rank.

A key goes to Redis as UTF-8: a role that is not valid Unicode text (a lone
surrogate, which JSON can spell) cannot be named, and is refused here, before
it is sent, like a malformed namespace.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import _json
from ..._names import KIND_PATTERN, MAX_ROLE_LENGTH, is_name, is_text
from ..records import NO_RANK, Key, Record

__all__ = ["NAMED", "Keys", "TableNames", "decode", "field", "key_at", "text"]

NAMED = ":"
"""What a named record's field starts with (a rank's is all digits)."""


def field(key: Key) -> str:
    """``key``'s field in its table: its rank in decimal, or ``:`` and its name (see the top)."""
    return str(key.rank) if key.name is None else NAMED + key.name


def key_at(namespace: str, kind: str, role: str, at: bytes | str) -> Key:
    """The key of a table's field ``at`` (a reply's bytes, or a target's text)."""
    if isinstance(at, bytes):
        at = at.decode()
    if at.startswith(NAMED):
        return Key(namespace, kind, role, NO_RANK, at[1:])
    return Key(namespace, kind, role, int(at))


@dataclass(frozen=True, slots=True)
class Keys:
    """The names of one registry's keys (one prefix)."""

    incarnation: str
    seq: str
    floor: str
    versions: str
    counts: str
    roles: str
    feed: str
    records: str
    """What every rank table's name starts with."""
    leases: str
    deadlines: str
    owners: str

    @classmethod
    def of(cls, prefix: str) -> Keys:
        tag = f"{{{prefix}}}"
        return cls(
            incarnation=f"{tag}:incarnation",
            seq=f"{tag}:seq",
            floor=f"{tag}:floor",
            versions=f"{tag}:versions",
            counts=f"{tag}:counts",
            roles=f"{tag}:roles",
            feed=f"{tag}:feed",
            records=f"{tag}:records:",
            leases=f"{tag}:leases",
            deadlines=f"{tag}:deadlines",
            owners=f"{tag}:owners",
        )

    def held(self, lease: str) -> str:
        """The set of what ``lease`` holds (the scripts find the prefix by cutting ``leases``'s name)."""
        return f"{self.leases[: -len('leases')]}held:{lease}"

    def table(self, key: Key) -> str:
        """The hash of ``key``'s ranks; ``ValueError`` for a key Redis cannot name."""
        if not is_name(key.namespace):
            raise ValueError(f"Namespace {key.namespace!r} is not a valid namespace name.")
        if not KIND_PATTERN.fullmatch(key.kind):
            raise ValueError(f"Record kind {key.kind!r} is not a valid kind.")
        if not key.role or len(key.role) > MAX_ROLE_LENGTH:
            # The role goes on every feed entry of the table's changes: bounded, whoever writes.
            raise ValueError(f"A role is a non-empty string of at most {MAX_ROLE_LENGTH} characters.")
        if not is_text(key.role):
            raise ValueError(
                f"Role {key.role!r} is not valid Unicode text (a lone surrogate): Redis cannot name it."
            )
        return f"{self.records}{key.namespace}:{key.kind}:{key.role}"

    def write(self, table: str) -> list[str]:
        """The ``KEYS`` of ``lua.DELETE`` on ``table`` (``puts`` names those of ``lua.PUTS``)."""
        return [
            self.incarnation,
            self.seq,
            self.floor,
            self.versions,
            self.counts,
            table,
            self.feed,
            self.roles,
            self.leases,
            self.owners,
        ]

    def ending(self, lease: str) -> list[str]:
        """The ``KEYS`` of ``lua.END``, which ends ``lease``: a write's, its held set for the table."""
        return [*self.write(self.held(lease)), self.deadlines]


class TableNames:
    """Rank tables' names, each made (and checked) once per namespace, kind and role: a hot path's."""

    def __init__(self, keys: Keys, kept: int = 4096) -> None:
        self._keys = keys
        self._kept = kept
        self._names: dict[tuple[str, str, str], str] = {}

    def of(self, key: Key) -> str:
        """``key``'s rank table; ``ValueError`` for a key Redis cannot name (:meth:`Keys.table`)."""
        group = (key.namespace, key.kind, key.role)
        name = self._names.get(group)
        if name is None:
            name = self._keys.table(key)
            if len(self._names) >= self._kept:
                self._names.clear()
            self._names[group] = name
        return name


def decode(key: Key, blob: bytes | str) -> Record:
    """The record a rank table holds for ``key``."""
    if isinstance(blob, str):  # never with decode_responses off, which is how we connect
        blob = blob.encode()
    version, registered_at, value = blob.split(b" ", 2)
    return Record(key, _json.loads(value), int(version), float(registered_at))


def text(value: bytes | str) -> str:
    """A reply's string (replies come as bytes: the clients do not decode)."""
    return value.decode() if isinstance(value, bytes) else value
