"""The registry: the only way to the records, and waiting for them, woken by the store's change feed.

Theory of operation
-------------------
The store owns the records, their versions and the limits (see
``store/interface.py``); the registry owns the waiting. Every change the store
applies, made through this process or any other sharing the store, reaches
:meth:`Registry.changed`, and only that wakes waiters: a local registration
wakes nobody directly, so the path is the same on one process and on many.

The registry is the only way the server reaches the records,
their versions and the leases. Every face reads and writes through it, never
through the store it stands on, so one place decides what a stopping server
still does: a change (a register, a member added or removed, an unregister)
and every lease call pass :meth:`Registry._open`, which refuses them with
:class:`~aiobootstrap.exceptions.ShuttingDown` once the registry is closed. A
read is answered even then: a reply in flight may still need the version or
the boot id. Each of its record calls hands back the store's own awaitable: no
coroutine of its own wraps the store's, so a registration costs one plain
call more than the store's write, and the store's refusals (limits, a lease
gone) reach the caller as the store raises them.

Waiting has two rooms, each told every change by :meth:`Registry.changed`:

- ``waits`` (:class:`KeyWaits`): a wait for one key, and for a set of ranks
  (the sweep of a batch get), parked on the key's *waitlist*; how a wait parks
  so that no change slips past is told there.
- ``watchers`` (:class:`Watchers`): everything else that waits or listens,
  grouped by what it watches (etcd's watcher groups): a set of keys
  (:meth:`Registry.wait_keys`), a condition over a namespace's kind, seeded by
  one read and told each change as it lands (:meth:`Registry.wait_until`), and
  a plain subscription to a kind's changes (:meth:`Registry.subscribe`). A
  change finds each of them by lookup, by key or by (namespace, kind).

No face parks a wait of its own to hear changes. A waiter that leaves
(answered, timed out or cancelled) leaves nothing behind, so probing keys that
never register holds nothing. Running out of time is a normal answer
(``None``, the keys still missing, ``False``), not an exception. ``close()``
wakes every waiter with :class:`~aiobootstrap.exceptions.ShuttingDown`. The
registry also knows the task of each parked wait (``parked_tasks``): a server
that stops can answer those requests itself, one write each, and cancel their
tasks, which is much cheaper than waking thousands of handlers to build a
``503`` each (``server/app.py``, ``release_waiters``).

``deliveries`` shows a host what the feed brings (``core/subscribers``):
each record delivered to a key's waiters, published just before they are
woken (what a subscriber schedules with ``call_soon`` runs after the step
that made the change and before any of them resumes), and ``None`` for a key
deleted. A subscriber must not block; what it raises is logged. The server's
pre-built gets (``server/fastpath/gets.py``) subscribe to it.

This module is pure asyncio: it knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from ..._ranks import RankSet
from ...exceptions import ShuttingDown
from ...store import Change, ChangeListener, Key, LeaseState, LocalStore, Record, Store
from ...store.records import HeldLease, Target
from ..parking import Parking
from ..subscribers import DeliveryListener, Subscribers
from .conditions import AtLeast, Condition
from .waits import KeyWaits
from .watchers import Watchers

__all__ = ["AtLeast", "Condition", "Registry"]

_T = TypeVar("_T")
Call = Coroutine[Any, Any, _T]
"""What a record call of the registry returns: the store's coroutine (or a wait's), to be awaited by the caller."""


class Registry:
    """The records of a store, and the requests waiting for them.

    Hand it to :meth:`Store.open` as the listener: its feed is what wakes waiters.
    """

    def __init__(self, store: Store, *, max_waiters: int | None = None) -> None:
        """``max_waiters`` limits the parked waits (:class:`TooManyWaiters` past it)."""
        self.store = store
        """The store itself: for whoever opens and closes it (``server/app.py``), and for the registry."""
        self.deliveries: Subscribers[DeliveryListener] = Subscribers("the registry's deliveries")
        """Hears each record delivered to waiters and each key deleted (see the module's notes)."""
        self.parking = Parking(max_waiters)
        """Who is parked, by namespace and rank (``/ranks``); the watch history counts its watchers here too."""
        self._keys = KeyWaits(store, self.parking, self.deliveries)
        """The waits for one key and for a set of ranks (``waits``)."""
        self._watchers = Watchers(store, self.parking)
        """The set waits, conditions and subscriptions, by what they watch (``watchers``)."""
        self._closed = False

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

    # -- waiting: the two rooms (``waits``, ``watchers``) ------------------

    def wait(self, key: Key, timeout: float, after: int = 0) -> Call[Record | None]:
        """``key``'s record newer than ``after``, waiting up to ``timeout`` seconds; ``None`` when the time
        runs out first and the store shows no such record."""
        if timeout <= 0 and after <= 0:
            return self.store.get(key)  # no wait, and every version is above 0: the read is the answer
        return self._keys.wait(key, timeout, after)

    def wait_all(
        self, namespace: str, kind: str, role: str, ranks: RankSet, timeout: float, after: int = 0
    ) -> Call[tuple[list[Record], RankSet]]:
        """The records of ``ranks`` (one kind and role) newer than ``after``, by rank, and the ranks still
        missing when ``timeout`` seconds ran out (empty when all arrived)."""
        return self._keys.wait_all(namespace, kind, role, ranks, timeout, after)

    def wait_keys(self, keys: Sequence[Key], timeout: float) -> Call[list[Record | None]]:
        """The records of ``keys`` (named ones, say), in order (``None``: missing), once all exist or at
        ``timeout`` seconds: three reads, however many keys arrive meanwhile."""
        return self._watchers.wait_keys(keys, timeout)

    def wait_until(self, condition: Condition, timeout: float) -> Call[bool]:
        """Whether ``condition`` holds, waiting up to ``timeout`` seconds: seeded by one read (shared by the
        waiters of an equal condition), then told each change of its kind as it lands."""
        return self._watchers.wait_until(condition, timeout)

    def subscribe(self, namespace: str, kind: str, listener: ChangeListener) -> Callable[[], None]:
        """Tell ``listener`` every change of ``kind`` in ``namespace`` as it lands, parking no wait; call what
        this returns to stop."""
        return self._watchers.subscribe(namespace, kind, listener)

    # -- who waits ---------------------------------------------------------

    @property
    def parked(self) -> int:
        """How many waits are parked right now."""
        return self.parking.count

    @property
    def parked_tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks of the waits parked right now, in the order they parked (a task parks one wait at a time)."""
        return self.parking.tasks

    def parked_in(self, namespace: str) -> int:
        """How many waits are parked right now in ``namespace``."""
        return self.parking.in_namespace(namespace)

    def parked_namespaces(self) -> list[str]:
        """The namespaces with parked waits."""
        return self.parking.namespaces()

    @property
    def waiting_keys(self) -> int:
        """How many keys a wait waits for right now (a waitlist, or a set wait's missing key)."""
        return len(self._keys.waitlists) + self._watchers.keys

    def is_waited(self, key: Key) -> bool:
        """Whether a wait for one key (or a set of ranks' sweep) waits for ``key`` right now."""
        return key in self._keys.waitlists

    @property
    def watched_kinds(self) -> int:
        """How many (namespace, kind)s a condition or a subscription watches right now."""
        return self._watchers.kinds

    def oldest_waits(self) -> dict[tuple[str, str, str], float]:
        """Per (namespace, kind, role) with waits parked: the seconds the longest wait there has waited."""
        oldest = self._keys.oldest()
        self._watchers.oldest(oldest)
        return oldest

    # -- the change feed, and closing ----------------------------------------

    def changed(self, changes: Sequence[Change]) -> None:
        """The store applied ``changes``: wake the waiters of their keys, and tell whoever watches more."""
        keys, watchers = self._keys, self._watchers
        for change in changes:
            watchers.changed(change)
            keys.changed(change)

    def resync(self) -> None:
        """The feed may have missed changes: read every parked key again, seed every condition again."""
        self._watchers.resync()
        self._keys.resync()

    def close(self) -> None:
        """Answer every parked wait with :class:`ShuttingDown`; refuse new changes and new waits.

        A wait whose task was cancelled meanwhile (see :attr:`parked_tasks`) ends cancelled. The store
        stays open: whoever opened it closes it. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        self.parking.close()
        self._watchers.close()
        self._keys.close()
