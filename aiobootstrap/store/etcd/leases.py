"""Leases as etcd leases: one etcd lease per aiobootstrap lease, kept alive through any replica.

Theory of operation
-------------------
A grant asks etcd for a lease (``LeaseGrant``), then records it in one
transaction: its account ``P/k/LEASE`` (its namespace and TTL, compared by
its release), its marker ``P/d/LEASE`` *on the etcd lease*, and the count
in ``P/g`` (``--max-leases`` and the namespace's share of it, compared: past
either the etcd lease is revoked and the grant refused). The id is the etcd lease's, in hex.

etcd's TTLs are whole seconds, and etcd raises a TTL below its minimum
(1.5 election timeouts, rounded up: 2 s with etcd's default 1 s election
timeout) to that minimum. So a ``ttl`` is rounded up to whole seconds, and
the lease's ``ttl`` is what etcd granted: a ``ttl=1`` lease is a 2 s lease
on a default cluster, and says so in the grant's reply (a client keeps it
alive every third of that). Nothing expires sooner than asked.

The records are not on the etcd lease (etcd would delete them without a
version or a count); the lease holds them through ``P/h/LEASE/...``. When
etcd expires or revokes the lease it deletes the marker; every replica's
feed hears the deletion (``Feed.ended``) and *releases* the lease: one
namespace transaction (``records.Writes.release``) deletes each record it
still holds, a change with its own version, and its account. The first
replica to commit does it; the others find the account gone. A replica
also sweeps (accounts without a marker) at open, after its feed restarts,
and every :data:`SWEEP_INTERVAL`, for leases that ended while no replica
heard it. etcd's lessor checks expiry every 500 ms: a lease ends within
about a second of its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
from collections.abc import Sequence
from typing import Any

from ... import _json
from ...exceptions import LeaseNotFound, StoreUnavailable
from ..limits import StoreLimits, lease_share, too_many_leases, too_many_leases_in
from ..records import HeldLease, LeaseState, Target
from ..stopping import stop_task
from . import messages as m
from .connection import Connection
from .keys import Global, Keys, StoredRecord
from .namespaces import Namespaces
from .records import RELEASED_AT_ONCE, Moved, Writes

__all__ = ["EtcdLeases"]

logger = logging.getLogger("aiobootstrap")

KEEPALIVE_SECONDS = 1.0
"""A keepalive's deadline (the store's, 3 s by default, when that is shorter): a client keeps a lease alive
every third of its TTL (2 s at etcd's minimum), so a keepalive that waits longer on a stalled etcd
(``SIGSTOP``, a stalled disk) answers after the next was due. It is a ``503`` instead, which the client
retries; the lease lives on while etcd keeps it (etcd counts a stall of its own against a lease's TTL: a
member stalled past it ends the lease when it runs again, and the keepalive after that is a ``404``)."""

SWEEP_INTERVAL = 10.0
"""Seconds between two sweeps for leases that ended unheard (a backstop: the feed hears each end)."""


class EtcdLeases:
    """The lease calls over etcd, and the releases of the leases that ended."""

    def __init__(
        self, connection: Connection, keys: Keys, namespaces: Namespaces, limits: StoreLimits
    ) -> None:
        self._connection = connection
        self._keys = keys
        self._namespaces = namespaces
        self._writes = Writes(keys)
        self._limits = limits
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self.held = self.expired = self.revoked = 0

    def start(self) -> None:
        self._sweeper = asyncio.create_task(self._sweep_every(), name="aiobootstrap etcd lease sweeper")

    async def stop(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        await stop_task(sweeper)
        for task in list(self._tasks):
            await stop_task(task)

    # -- the calls --------------------------------------------------------------

    async def grant(self, namespace: str, ttl: float) -> LeaseState:
        seconds = max(1, math.ceil(ttl))
        reply = await self._connection.call(lambda client: m.grant(client, seconds))
        lease_id, granted = int(reply.ID), int(reply.TTL)
        lease = f"{lease_id:x}"
        k = self._keys
        try:
            while True:
                found = await self._connection.call(
                    lambda client: m.read(client, [m.get(k.globals)]), read=True
                )
                hit = found.reads[0][0] if found.reads[0] else None
                glob = Global.of(None if hit is None else hit.value, 0 if hit is None else hit.mod_revision)
                limit = self._limits.max_leases
                here = glob.leases_in.get(namespace, 0)
                if limit is not None and glob.leases >= limit:
                    raise too_many_leases(glob.leases)
                if limit is not None and here >= (share := lease_share(limit, glob.leases, here)):
                    raise too_many_leases_in(namespace, here, share)
                glob.leases += 1
                glob.leases_in[namespace] = here + 1
                account = _json.dumps({"ns": namespace, "ttl": granted})
                ops = [
                    m.put(k.account(lease), account),
                    m.put(k.marker(lease), namespace.encode(), lease=lease_id),
                    m.put(k.globals, glob.encode()),
                ]
                done = await self._connection.call(m.txn([m.mod_is(k.globals, glob.mod)], ops))
                if done.succeeded:
                    self.held = glob.leases
                    return LeaseState(lease, namespace, float(granted), float(granted))
        except BaseException:
            with contextlib.suppress(Exception):
                await self._connection.call(lambda client: m.revoke(client, lease_id))
            raise

    async def _account(self, namespace: str, lease: str) -> float:
        """The lease's TTL; ``LeaseNotFound`` when it is gone or another namespace's."""
        key = self._keys.account(lease)
        found = await self._connection.call(lambda client: m.read(client, [m.get(key)]), read=True)
        return _ttl_of(found, namespace, lease)

    async def keepalive(self, namespace: str, lease: str) -> LeaseState:
        """The account's read and etcd's keepalive, together within :data:`KEEPALIVE_SECONDS` (asked of the
        next member when one fails: a keepalive sent twice only renews twice)."""
        lease_id = _lease_id(lease)
        key = self._keys.account(lease)

        async def alive(client: Any) -> tuple[m.Txn, int]:
            found = await m.read(client, [m.get(key)])
            return found, (await m.keepalive(client, lease_id) if found.reads[0] else 0)

        found, remaining = await self._connection.call(alive, read=True, within=KEEPALIVE_SECONDS)
        ttl = _ttl_of(found, namespace, lease)
        if remaining <= 0:
            raise LeaseNotFound(lease)
        return LeaseState(lease, namespace, ttl, float(remaining))

    async def read(self, namespace: str, lease: str) -> LeaseState:
        lease_id = _lease_id(lease)
        ttl = await self._account(namespace, lease)
        prefix = self._keys.held_by(lease)
        holds, live = await asyncio.gather(
            self._connection.call(
                lambda client: m.read(client, [m.get_prefix(prefix, keys_only=True)]), read=True
            ),
            self._connection.call(lambda client: m.time_to_live(client, lease_id), read=True),
        )
        if live[0] < 0:
            raise LeaseNotFound(lease)
        targets = tuple(self._keys.target_of(lease, found.key) for found in holds.reads[0])
        return LeaseState(lease, namespace, ttl, float(live[0]), targets)

    async def revoke(self, namespace: str, lease: str) -> LeaseState:
        state = await self.read(namespace, lease)
        # The etcd lease first: its marker goes with it, so no write can put a record on it after.
        with contextlib.suppress(StoreUnavailable):
            await self._connection.call(lambda client: m.revoke(client, _lease_id(lease)))
        if await self.release(lease) >= 0:
            self.revoked += 1
        return state

    async def holders(self, targets: Sequence[Target]) -> list[HeldLease | None]:
        if not targets:
            return []
        keys = self._keys
        ops = [m.get(keys.record(key)) for key, _ in targets]
        found = await self._connection.call(lambda client: m.read(client, ops), read=True)
        leases: list[str | None] = []
        for (_, member), hits in zip(targets, found.reads, strict=True):
            leases.append(StoredRecord.of(hits[0].value).holder(member) if hits else None)
        live: dict[str, HeldLease | None] = {}
        for lease in {lease for lease in leases if lease}:
            remaining, granted = await self._connection.call(
                functools.partial(m.time_to_live, lease_id=_lease_id(lease)), read=True
            )
            live[lease] = None if remaining < 0 else (lease, float(remaining), float(granted))
        return [None if lease is None else live.get(lease) for lease in leases]

    # -- ends -------------------------------------------------------------------

    def ended(self, lease: str) -> None:
        """The feed heard ``lease``'s marker deleted: release it (in a task of its own)."""
        task = asyncio.create_task(self._release_ended(lease), name=f"aiobootstrap etcd release {lease}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def lost(self) -> None:
        """The feed restarted: it may have missed ends; sweep."""
        task = asyncio.create_task(self._sweep_logged(), name="aiobootstrap etcd lease sweep")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _release_ended(self, lease: str) -> None:
        try:
            if await self.release(lease) >= 0:
                self.expired += 1
        except StoreUnavailable as exc:
            logger.info("Lease %s ended but could not be released yet (%s); the sweep will.", lease, exc)

    async def release(self, lease: str) -> int:
        """Delete what ``lease`` holds, and its account: the records released, or -1 when it was already."""
        keys = self._keys
        released, rounds = 0, 0
        while True:
            first = await self._connection.call(
                m.txn((), [m.get(keys.account(lease)), m.get_prefix(keys.held_by(lease), keys_only=True)]),
                read=True,
            )
            if not first.reads[0]:
                return released if rounds else -1
            namespace = str(_json.loads(first.reads[0][0].value)["ns"])
            targets = sorted(
                (keys.target_of(lease, found.key) for found in first.reads[1]),
                key=lambda target: (target[0].rank, target[0].name or "", target[1] or ""),
            )[:RELEASED_AT_ONCE]
            reads = [keys.account(lease), *{keys.record(key) for key, _ in targets}]
            decide = self._writes.release(lease, targets)
            try:
                count, done = await self._namespaces.write(namespace, decide, reads, [keys.held_by(lease)])
            except Moved:
                continue
            if count < 0:
                return released if rounds else -1
            released, rounds = released + int(count), rounds + 1
            if done:
                return released

    async def sweep(self) -> None:
        """Release every lease with an account and no marker (it ended while nobody heard)."""
        keys = self._keys
        ops = [m.get_prefix(keys.accounts, keys_only=True), m.get_prefix(keys.markers, keys_only=True)]
        found = await self._connection.call(lambda client: m.read(client, ops), read=True)
        accounts = {hit.key[len(keys.accounts) :].decode() for hit in found.reads[0]}
        markers = {keys.lease_of(hit.key) for hit in found.reads[1]}
        for lease in sorted(accounts - markers):
            if await self.release(lease) >= 0:
                self.expired += 1

    async def _sweep_logged(self) -> None:
        with contextlib.suppress(StoreUnavailable):
            await self.sweep()

    async def _sweep_every(self) -> None:
        while True:
            await self._sweep_logged()
            await asyncio.sleep(SWEEP_INTERVAL)


def _ttl_of(found: m.Txn, namespace: str, lease: str) -> float:
    """The TTL of a lease's account as read (``found``); ``LeaseNotFound`` when gone or another namespace's."""
    if not found.reads[0]:
        raise LeaseNotFound(lease)
    data = _json.loads(found.reads[0][0].value)
    if data.get("ns") != namespace:
        raise LeaseNotFound(lease)
    return float(data["ttl"])


def _lease_id(lease: str) -> int:
    try:
        return int(lease, 16)
    except ValueError:
        raise LeaseNotFound(lease) from None
