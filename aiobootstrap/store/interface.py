"""The store interface: records, their versions, the limits that need counts, the change feed.

Theory of operation
-------------------
A store owns every record of every namespace. A record sits under a
:class:`Key`: a namespace, a record kind, a role, and a *rank* (an integer
from 0: a worker's record) or a *name* (:meth:`Key.named`: any non-empty
string, such as Mooncake's ``mooncake/ram/10.0.0.1:1234``, kept exactly;
``store.records.check_key_name`` has the rule). The name ``"7"`` and the rank 7 are two keys.
Both live in one table per (namespace, kind, role), and every call treats a
name as a rank: put (on a lease or not), delete, the reads, the feed, the
leases, ``records`` (ranks first, then names) and ``count``; ``max_ranks``
counts a name as a rank. Only the rank-set reads (``records_in``, and the
waits built on it) know ranks alone. A record holds the JSON object
registered under its key. The store, and nothing else, numbers changes: each put or
delete that changes something takes the next *version* of its namespace (one
counter per namespace, strictly increasing, never reused, not even after the
namespace empties and its counter is forgotten: a new counter starts above a
floor kept for that purpose). Several processes may share one store (Redis):
the numbering is then atomic in the store, so versions grow across replicas.

Most records are replaced whole (``put``). A *set record* (the encoder URL
list) is changed one member at a time by :meth:`Store.set_member`, whose
read-modify-write the store makes atomic like any put: adding a member in one
replica never loses another replica's addition.

The limits that need counts are the store's too, checked atomically with the
write that would pass them: ``max_ranks`` distinct ranks per (namespace, kind,
role), ``max_roles`` roles per (namespace, kind), ``max_namespaces``
namespaces holding records (``StoreLimits``). A check-then-write in the
caller would race with other writers, in this process or another. Each
refusal is worded once, in ``limits``, whichever store counts.

A *lease* (SPEC section 9) holds records: a write names it (``put``'s and
``set_member``'s ``lease``), in the same atomic step as the write. When the
lease ends (expired, or revoked) the store deletes what it still holds
exactly as a delete or a member's removal would: a version each, on the feed.
A store without leases answers every lease call with ``LeasesUnsupported``.

Every change the store applies, whoever asked for it, is announced on its
*change feed*: the listener handed to :meth:`Store.open` hears it, in order,
on the event loop. Waiting is built on the feed alone (see ``core/registry``), so
a write through another replica wakes local waiters exactly as a local write
does. A feed that may have missed changes (a reconnect, a trimmed stream)
says so with :meth:`ChangeListener.resync`: the listener then re-reads every
key it cares about.

A store that cannot be reached raises :class:`StoreUnavailable` (a ``503``
with ``Retry-After``), never an answer it cannot prove: a read that fails is
not "absent".
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, Protocol

from .._ranks import RankSet
from ..exceptions import LeasesUnsupported
from .records import Change, HeldLease, Key, LeaseState, Record, Target

__all__ = ["ABSENT", "ChangeListener", "Store", "ignore_changes"]

READ_BY_KEY = 1024
"""A rank set of at most this many ranks is read key by key (:meth:`Store.records_in`)."""

ABSENT = -1
"""The version :meth:`Store.put_if` compares with when there must be no record under the key yet."""


class ChangeListener(Protocol):
    """Who hears a store's change feed (the registry)."""

    def changed(self, changes: Sequence[Change]) -> None:
        """``changes`` were applied, in this order. Called on the event loop; must not block."""

    def resync(self) -> None:
        """The feed may have missed changes: re-read every key you care about."""


def ignore_changes() -> ChangeListener:
    """A listener for a store nobody listens to (not opened yet, or closed)."""

    class _Nobody:
        def changed(self, changes: Sequence[Change]) -> None:
            pass

        def resync(self) -> None:
            pass

    return _Nobody()


class Store(abc.ABC):
    """Where records live. Open with :meth:`open`, close with :meth:`close`.

    Every method may raise :class:`~aiobootstrap.exceptions.StoreUnavailable`.
    """

    @property
    @abc.abstractmethod
    def incarnation(self) -> str:
        """An id for the store's data: changes only when the data was lost (the boot id)."""

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """What the store is, for one log line (``memory``, ``file /var/lib/...``, ``redis://host:port/0``)."""

    @abc.abstractmethod
    async def open(self, listener: ChangeListener) -> None:
        """Connect or load, and start announcing changes to ``listener``."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Finish the writes already acknowledged, stop the feed, release everything."""

    @abc.abstractmethod
    async def put(self, key: Key, value: dict[str, Any], lease: str | None = None) -> Record:
        """Store ``value`` under ``key`` with the namespace's next version; return the stamped record.

        With ``lease``, the record is then held by that lease (and by no other);
        without, by none. Raises :class:`~aiobootstrap.exceptions.TooManyRanks` or
        :class:`~aiobootstrap.exceptions.TooManyNamespaces` when a limit would
        be passed, :class:`~aiobootstrap.exceptions.LeaseNotFound` when the
        lease is gone (:class:`~aiobootstrap.exceptions.LeasesUnsupported` on a
        store without leases); nothing is changed then. When this returns, the
        record is as safe as the store makes it, and the change is on the feed.
        """

    @abc.abstractmethod
    async def put_if(
        self, key: Key, value: dict[str, Any], version: int, lease: str | None = None
    ) -> Record | None:
        """:meth:`put`, only if the record under ``key`` is still at ``version`` (:data:`ABSENT`: there is none).

        The comparison and the write are one step, on every replica of the
        store: of two writers that read the same version, one wins and the
        other gets ``None``, with nothing changed (no version taken, nothing on
        the feed); it may read again and decide anew. The refusals of
        :meth:`put` hold as well.
        """

    @abc.abstractmethod
    async def delete(self, key: Key) -> Record | None:
        """Remove ``key`` atomically, with the namespace's next version; return what was stored.

        ``None`` (and no version taken, nothing on the feed) when nothing was.
        """

    @abc.abstractmethod
    async def set_member(
        self, key: Key, member: str, *, present: bool, lease: str | None = None
    ) -> Record | None:
        """Add ``member`` to (``present``) or remove it from the set record under ``key``, atomically.

        A *set record*'s value is ``{"members": [...]}``: distinct strings in
        order of first addition (a member removed and added again goes last).
        A change follows :func:`with_member` (at most :data:`MAX_MEMBERS`
        members: one more raises :class:`~aiobootstrap.exceptions.TooManyRanks`,
        nothing changed), and is a put of the new value:
        the namespace's next version, the limits checked when the record is
        new, durable and on the feed when this returns (its :class:`Change`
        naming the member, ``Change.member``); removing the last
        member leaves the record with no members. Returns the record as it
        now is, or ``None`` when there is none. When nothing changes (adding
        a member already in, removing one that is not), no version is taken
        and nothing goes on the feed. A member added is then held by ``lease``
        (``LeaseNotFound``: nothing changed), or by none, even when it was
        listed already; ``lease`` means nothing to a removal.
        """

    @abc.abstractmethod
    async def get(self, key: Key) -> Record | None:
        """The record under ``key``, or ``None`` when the store proves there is none."""

    @abc.abstractmethod
    async def get_many(self, keys: Sequence[Key]) -> list[Record | None]:
        """The records under ``keys``, in order, read in one round trip."""

    @abc.abstractmethod
    async def records(self, namespace: str, kind: str, role: str) -> list[Record]:
        """Every record of one kind and role in ``namespace``: ranks by rank, then names by name (``by_key``)."""

    async def count(self, namespace: str, kind: str, role: str) -> int:
        """How many records of one kind and role ``namespace`` holds: a store counts without reading them."""
        return len(await self.records(namespace, kind, role))

    async def records_in(self, namespace: str, kind: str, role: str, ranks: RankSet) -> list[Record]:
        """The records of one kind and role in ``namespace`` whose ranks are in ``ranks``, by rank.

        A read whose cost grows with what exists, however many ranks the set
        names: a small set is read key by key (:meth:`get_many`), a large one as
        the table, kept by membership. A store may read its table more cheaply.
        Ranks only: a named record is in no rank set (a named kind is not read by rank set).
        """
        if len(ranks) <= READ_BY_KEY:
            found = await self.get_many([Key(namespace, kind, role, rank) for rank in ranks])
            return [record for record in found if record is not None]
        table = [record for record in await self.records(namespace, kind, role) if record.key.name is None]
        parts = ranks.select([record.key.rank for record in table])
        return (
            table if parts == [slice(0, len(table))] else [record for part in parts for record in table[part]]
        )

    @abc.abstractmethod
    async def version(self, namespace: str) -> int:
        """The namespace's latest version.

        A namespace that holds nothing answers the floor its first change will
        number above (0 on a store that never forgot a namespace).
        """

    @abc.abstractmethod
    async def namespaces(self) -> list[str]:
        """The namespaces holding records, sorted."""

    def follow_in_order(self, listener: ChangeListener) -> bool:
        """Have ``listener`` hear every change in version order, this process's writes included.

        Call before :meth:`open`. ``False``: the feed of :meth:`open` is in that order
        already (a store in one process), so hand it that listener too. A store
        whose feed announces its own writes ahead of the others' (Redis) says
        ``True`` and feeds ``listener`` every change of its stream, in the stream's order
        (key, version and member: no record).
        """
        return False

    # -- leases: a store that holds none answers every call with LeasesUnsupported (a 501) --

    async def grant_lease(self, namespace: str, ttl: float) -> LeaseState:
        """A new lease of ``ttl`` seconds (``TooManyLeases`` past ``max_leases``)."""
        raise self._no_leases()

    async def keepalive_lease(self, namespace: str, lease: str) -> LeaseState:
        """Give the lease its full TTL again (``LeaseNotFound`` when it is gone)."""
        raise self._no_leases()

    async def read_lease(self, namespace: str, lease: str) -> LeaseState:
        """The lease and the records it holds (``LeaseNotFound`` when it is gone)."""
        raise self._no_leases()

    async def revoke_lease(self, namespace: str, lease: str) -> LeaseState:
        """End the lease now, deleting every record on it as a delete would (``LeaseNotFound``)."""
        raise self._no_leases()

    async def leases_of(self, targets: Sequence[Target]) -> list[HeldLease | None]:
        """Each target's lease, its seconds remaining and its TTL, or ``None`` (a local store answers without I/O)."""
        return [None for _ in targets]

    def lease_figures(self) -> tuple[int, int, int] | None:
        """Leases held now, expired and revoked since the store opened (this process's); ``None``: no leases."""
        return None

    def _no_leases(self) -> LeasesUnsupported:
        return LeasesUnsupported(
            f"Leases are not supported on this store ({self.description}) yet; register without a lease."
        )

    @abc.abstractmethod
    async def ping(self) -> None:
        """Return when the store answers; raise ``StoreUnavailable`` when it does not (``/ready``)."""
