"""The door: the only way the server reaches the records, their versions and the leases.

Every face reads and writes through the registry, never through the store it
stands on, so that one place decides what a stopping server still does. A
change (a register, a member added or removed, an unregister) and every lease
call pass :meth:`Door._open`, which refuses them with
:class:`~aiobootstrap.exceptions.ShuttingDown` once the registry is closed. A
read is answered even then: a reply in flight may still need the version or
the boot id.

Each method hands back the store's own awaitable: no coroutine of its own
wraps the store's, so a registration costs one plain call more than the
store's write, and the store's refusals (limits, a lease gone) reach the
caller as the store raises them.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from ..._ranks import RankSet
from ...exceptions import ShuttingDown
from ...store import Key, LeaseState, LocalStore, Record, Store
from ...store.interface import HeldLease, Target

__all__ = ["Door"]

_T = TypeVar("_T")
Call = Coroutine[Any, Any, _T]
"""What a door method returns: the store's coroutine, to be awaited by the caller."""


class Door:
    """The records of a store, read and changed; the changes refused once closed."""

    store: Store
    """The store itself: for whoever opens and closes it (``server/app.py``), and for the registry."""
    _closed: bool

    def _open(self) -> Store:
        """The store, for a change or a lease call; :class:`ShuttingDown` once the registry is closed."""
        if self._closed:
            raise ShuttingDown()
        return self.store

    @property
    def closed(self) -> bool:
        return self._closed

    # -- reading ---------------------------------------------------------

    @property
    def incarnation(self) -> str:
        """The store's incarnation: the boot id every reply names, and a version counts in."""
        return self.store.incarnation

    def get(self, key: Key) -> Call[Record | None]:
        return self.store.get(key)

    def get_many(self, keys: Sequence[Key]) -> Call[list[Record | None]]:
        return self.store.get_many(keys)

    def records(self, namespace: str, kind: str, role: str) -> Call[list[Record]]:
        """Every record of one kind and role in ``namespace``: ranks by rank, then names by name."""
        return self.store.records(namespace, kind, role)

    def records_in(self, namespace: str, kind: str, role: str, ranks: RankSet) -> Call[list[Record]]:
        return self.store.records_in(namespace, kind, role, ranks)

    def count(self, namespace: str, kind: str, role: str) -> Call[int]:
        return self.store.count(namespace, kind, role)

    def version(self, namespace: str) -> Call[int]:
        """The namespace's latest version (its floor when it holds nothing)."""
        return self.store.version(namespace)

    def namespaces(self) -> Call[list[str]]:
        """The namespaces holding records, sorted."""
        return self.store.namespaces()

    def ping(self) -> Call[None]:
        """Return when the store answers (``/ready``); ``StoreUnavailable`` when it does not."""
        return self.store.ping()

    def leases_of(self, targets: Sequence[Target]) -> Call[list[HeldLease | None]]:
        """Each target's lease and its seconds remaining, or ``None``."""
        return self.store.leases_of(targets)

    def lease_figures(self) -> tuple[int, int, int] | None:
        """Leases held now, expired and revoked since the store opened; ``None``: a store without leases."""
        return self.store.lease_figures()

    # -- reading from another thread: a store kept in this process only ----

    @property
    def peeks(self) -> bool:
        """Whether :meth:`peek` and :meth:`peek_records` answer (from any thread, with no I/O)."""
        return isinstance(self.store, LocalStore)

    def peek(self, key: Key) -> Record | None:
        """:meth:`get`, from any thread, when :attr:`peeks`."""
        return self._local().peek(key)

    def peek_records(self, namespace: str, kind: str, role: str) -> list[Record]:
        """:meth:`records`, from any thread, when :attr:`peeks`."""
        return self._local().peek_records(namespace, kind, role)

    def _local(self) -> LocalStore:
        store = self.store
        if not isinstance(store, LocalStore):
            raise TypeError(
                f"The store ({store.description}) is not kept in this process: read it on its loop."
            )
        return store

    # -- changing: refused once closed -----------------------------------

    def register(self, key: Key, value: dict[str, Any], lease: str | None = None) -> Call[Record]:
        """Store ``value`` under ``key`` with a new version (held by ``lease``, if given); the feed wakes its waiters."""
        # Not shielded: a client that hangs up may cancel this, and each store
        # makes a write all or nothing, announced on the feed either way. A
        # shield would also run the write in a task of its own, and the
        # waiters it wakes would then be answered before this registration.
        return self._open().put(key, value, lease)

    def register_if(
        self, key: Key, value: dict[str, Any], version: int, lease: str | None = None
    ) -> Call[Record | None]:
        """:meth:`register`, only if ``key``'s record is still at ``version`` (``ABSENT``: none); else ``None``.

        For a rule that depends on what is stored (keep the first value, refuse
        a different one): read, decide, write with the version read; on
        ``None`` someone wrote in between, on this replica or another, so read
        again and decide anew.
        """
        return self._open().put_if(key, value, version, lease)

    def set_member(
        self, key: Key, member: str, *, present: bool, lease: str | None = None
    ) -> Call[Record | None]:
        """Add ``member`` to (held by ``lease``), or remove it from, the set record under ``key``; a change wakes."""
        return self._open().set_member(key, member, present=present, lease=lease)

    def unregister(self, key: Key) -> Call[Record | None]:
        """Forget ``key``; its waiters go on waiting for a new record."""
        return self._open().delete(key)

    def grant_lease(self, namespace: str, ttl: float) -> Call[LeaseState]:
        return self._open().grant_lease(namespace, ttl)

    def keepalive_lease(self, namespace: str, lease: str) -> Call[LeaseState]:
        return self._open().keepalive_lease(namespace, lease)

    def read_lease(self, namespace: str, lease: str) -> Call[LeaseState]:
        return self._open().read_lease(namespace, lease)

    def revoke_lease(self, namespace: str, lease: str) -> Call[LeaseState]:
        return self._open().revoke_lease(namespace, lease)
