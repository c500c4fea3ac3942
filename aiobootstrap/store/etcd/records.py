"""The etcd store's record writes, each decided on a namespace's state (``txn``): put, delete, a member.

Each function here fills a :class:`~.txn.Plan` from a :class:`~.txn.State`
and returns what the store call answers; ``txn`` commits the plan only if
the namespace is still as read. A write that names a lease checks that the
lease is this namespace's (its account ``P/k/LEASE``) and compares, in the
transaction, that its marker ``P/d/LEASE`` still exists: a lease that ends
meanwhile makes the write fail, and :class:`LeaseNotFound` follows. A
record (or a set record's member) moved from a lease to another, or to
none, has its hold key ``P/h/...`` moved in the same transaction.
"""

from __future__ import annotations

import time
from typing import Any

from ... import _json
from ...exceptions import LeaseNotFound
from ..members import with_member
from ..records import Key, Record
from . import messages as m
from .keys import Keys, StoredRecord
from .txn import Plan, State

__all__ = ["RELEASED_AT_ONCE", "Moved", "Writes"]

RELEASED_AT_ONCE = 40
"""Targets one release transaction takes: each costs up to three of etcd's 128 operations a transaction."""


class Writes:
    """Decisions for the writes of records (see the top)."""

    def __init__(self, keys: Keys) -> None:
        self._keys = keys

    def reads(self, key: Key, lease: str | None) -> list[bytes]:
        """The keys a write of ``key`` on ``lease`` reads before deciding."""
        keys = [self._keys.record(key)]
        if lease:
            keys += [self._keys.account(lease), self._keys.marker(lease)]
        return keys

    def check_lease(self, state: State, plan: Plan, lease: str) -> None:
        """``lease`` is alive and this namespace's, and must still be when the transaction commits."""
        found = state.found.get(self._keys.account(lease))
        if found is None or _json.loads(found.value).get("ns") != plan.namespace:
            raise LeaseNotFound(lease)
        if state.found.get(self._keys.marker(lease)) is None:
            # Ended (etcd deleted its marker), its records not yet released: gone all the same.
            raise LeaseNotFound(lease)
        plan.compares.append(m.exists(self._keys.marker(lease)))

    def _move(self, plan: Plan, key: Key, member: str | None, old: str | None, new: str | None) -> None:
        """The hold of ``key`` (or its ``member``) goes from lease ``old`` to ``new`` (``None``: none)."""
        if old == new:
            return
        if old:
            plan.do(m.delete(self._keys.hold(old, (key, member))))
        if new:
            plan.do(m.put(self._keys.hold(new, (key, member)), b""))

    def put(
        self,
        key: Key,
        value: dict[str, Any],
        expected: int | None,
        lease: str | None,
        member: str | None = None,
    ) -> Any:
        """A decision: put ``value`` (``member``: the set record's member added ``+M`` or removed ``-M``)."""

        def decide(state: State, plan: Plan) -> Record | None:
            current = state.record(self._keys, key)
            if expected is not None and (-1 if current is None else current.version) != expected:
                return None
            if lease:
                self.check_lease(state, plan, lease)
            if current is None:
                plan.add_record(key)
            version = plan.change(key, member=member)
            stored = StoredRecord(value, version, time.time())
            if member is None:
                stored.lease = lease
                self._move(plan, key, None, None if current is None else current.lease, lease)
            elif current is not None:
                stored.lease = current.lease
                stored.members = dict(current.members)
            if member is not None:
                name = member[1:]
                old = stored.members.pop(name, None)
                new = lease if member[0] == "+" else None
                if new:
                    stored.members[name] = new
                self._move(plan, key, name, old, new)
            plan.do(m.put(self._keys.record(key), stored.encode()))
            return stored.record(key)

        return decide

    def delete(self, key: Key) -> Any:
        def decide(state: State, plan: Plan) -> Record | None:
            current = state.record(self._keys, key)
            if current is None:
                return None
            plan.remove_record(key)
            plan.change(key, deleted=True)
            plan.do(m.delete(self._keys.record(key)))
            self._move(plan, key, None, current.lease, None)
            for name, held in current.members.items():
                self._move(plan, key, name, held, None)
            return current.record(key)

        return decide

    def set_member(self, key: Key, member: str, present: bool, lease: str | None) -> Any:
        put = self.put  # the change itself is a put of the new value

        def decide(state: State, plan: Plan) -> Record | None:
            current = state.record(self._keys, key)
            value = with_member(None if current is None else current.value, member, present=present)
            if value is not None:
                expected = -1 if current is None else current.version
                marked = ("+" if present else "-") + member
                changed: Record | None = put(key, value, expected, lease, marked)(state, plan)
                return changed
            if current is None:
                return None
            if present and current.members.get(member) != lease:
                # Listed already: only its lease moves (no version, nothing on the feed).
                if lease:
                    self.check_lease(state, plan, lease)
                old = current.members.pop(member, None)
                if lease:
                    current.members[member] = lease
                self._move(plan, key, member, old, lease)
                plan.do(m.put(self._keys.record(key), current.encode()))
            return current.record(key)

        return decide

    def release(self, lease: str, targets: list[tuple[Key, str | None]]) -> Any:
        """A decision: delete what ``lease`` still holds of ``targets`` (:data:`RELEASED_AT_ONCE` at most),
        each a change; with the last, the lease's account. Returns how many it released (-1: the account was gone
        already, released by this replica or another) and whether the release is done."""
        keys = self._keys

        def decide(state: State, plan: Plan) -> tuple[int, bool]:
            account = state.found.get(keys.account(lease))
            if account is None:
                return -1, True
            held = {keys.target_of(lease, found.key) for found in state.ranges[keys.held_by(lease)]}
            batch = sorted(held, key=lambda target: (target[0].rank, target[0].name or "", target[1] or ""))
            last = len(batch) <= RELEASED_AT_ONCE
            batch = batch[:RELEASED_AT_ONCE]
            if not set(batch) <= set(targets):
                raise _Moved
            records: dict[Key, StoredRecord | None] = {}
            released = 0
            for key, member in batch:
                if key not in records:
                    records[key] = state.record(keys, key)
                current = records[key]
                if not last:
                    plan.do(m.delete(keys.hold(lease, (key, member))))
                if current is None or current.holder(member) != lease:
                    continue
                released += 1
                if member is None:
                    plan.remove_record(key)
                    plan.change(key, deleted=True)
                    plan.do(m.delete(keys.record(key)))
                    records[key] = None
                    continue
                value = with_member(current.value, member, present=False)
                current.members.pop(member, None)
                if value is not None:
                    current.value = value
                    current.version = plan.change(key, member="-" + member)
                    current.registered_at = time.time()
            for key, current in records.items():
                if current is not None:
                    plan.do(m.put(keys.record(key), current.encode()))
            plan.compares.append(m.mod_is(keys.account(lease), account.mod_revision))
            if not last:
                plan.do(m.put(keys.account(lease), account.value))  # more to come: the account stays
                return released, False
            plan.do(m.delete_prefix(keys.held_by(lease)), m.delete(keys.account(lease)))
            plan.glob.lease_ended(plan.namespace)
            plan.touches_global = True
            return released, True

        return decide


class _Moved(Exception):
    """The lease came to hold records the release did not read: read them, and decide again."""


Moved = _Moved
