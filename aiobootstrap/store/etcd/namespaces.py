"""Sending a namespace's writes: the writes waiting for it go in its next transaction.

A process sends one transaction at a time per namespace, holding every
write that waited meanwhile (up to :data:`BATCH`): its own writes never
race each other, only another replica's, and many registrations at once
cost one consensus round, not one each. The writes of a batch are decided
in order on one read of the namespace, each seeing what the ones before it
wrote, each with its own version; a refusal (a limit, a lease gone) is that
write's alone. The transaction compares the namespace's ``P/m/NS`` with
what was read (``txn``); another replica's write in between makes it fail,
and the batch is read and decided again.

The transaction also puts ``P/c``, the list of its changes, which the feed
watches; the writes return once the feed has heard its revision (within
the call's deadline), so when a write returns its change is on the feed.

A batch is kept within etcd's request limit by its bytes too, not only its
count (:data:`BATCH_BYTES`): the writes that fit go in one transaction,
the rest in the next. A write alone past the limit (etcd refuses it
whole, before applying it) is :class:`PayloadTooLarge`, a ``413`` naming
the limit, for that write alone: it will never be taken, so it is no
``503`` to retry; and a batch etcd refuses for its size (a cluster with a
lower ``--max-request-bytes``) is sent again in halves.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ...exceptions import PayloadTooLarge, StoreUnavailable
from ..limits import StoreLimits
from . import messages as m
from .connection import Connection, too_large
from .feed import Feed
from .keys import Global, Keys, Meta, encode_changes
from .txn import Plan, State

__all__ = ["BATCH", "BATCH_BYTES", "Namespaces"]

_T = TypeVar("_T")

_ATTEMPTS = 10_000
"""Transactions one write may lose to other replicas' before it gives up (a 503): never, in practice."""

BATCH = 32
"""Writes one transaction holds at most: each reads up to three keys and writes up to four, within
etcd's 128 operations a transaction (``--max-txn-ops``)."""

BATCH_BYTES = m.MAX_REQUEST_BYTES - 64 * 1024
"""The bytes one transaction of several writes holds at most: etcd's default request limit, less room for
the namespace's own keys and what etcd wraps a request in."""


@dataclass(slots=True)
class _Write:
    """A write waiting for its namespace's next transaction."""

    decide: Callable[[State, Plan], Any]
    keys: Sequence[bytes]
    ranges: Sequence[bytes]
    done: asyncio.Future[Any]


class Namespaces:
    """Runs the writes of namespaces: one transaction at a time per namespace in this process, holding
    every write that waited for it (see the top)."""

    def __init__(self, connection: Connection, keys: Keys, feed: Feed, limits: StoreLimits) -> None:
        self._connection = connection
        self._keys = keys
        self._feed = feed
        self._limits = limits
        self._waiting: dict[str, list[_Write]] = {}
        self._runners: dict[str, asyncio.Task[None]] = {}

    async def read(self, namespace: str, keys: Sequence[bytes] = (), ranges: Sequence[bytes] = ()) -> State:
        """The namespace's state, ``keys`` and the keys under each of ``ranges``, at one revision."""
        k = self._keys
        ops = [m.get(k.boot), m.get(k.globals), m.get(k.meta(namespace))]
        ops += [m.get(key) for key in keys] + [m.get_prefix(prefix) for prefix in ranges]
        reply = await self._connection.call(m.txn((), ops), read=True)
        boot, glob, meta = (found[0] if found else None for found in reply.reads[:3])
        self._feed.check_boot(None if boot is None else boot.value)
        assert boot is not None
        g = Global.of(None if glob is None else glob.value, 0 if glob is None else glob.mod_revision)
        meta_state = Meta.of(
            None if meta is None else meta.value, 0 if meta is None else meta.mod_revision, g.floor
        )
        found = {key: (hits[0] if hits else None) for key, hits in zip(keys, reply.reads[3:], strict=False)}
        extra = reply.reads[3 + len(keys) :]
        return State(boot.mod_revision, g, meta_state, found, dict(zip(ranges, extra, strict=True)))

    async def write(
        self,
        namespace: str,
        decide: Callable[[State, Plan], _T],
        keys: Sequence[bytes] = (),
        ranges: Sequence[bytes] = (),
    ) -> _T:
        """Read, ``decide`` (which fills the plan and returns the result, or raises), commit; again on a race.

        The write joins the namespace's next transaction; a write already sent is not called back
        by a cancellation (it is answered to nobody).
        """
        done: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        # A caller cancelled meanwhile never reads the outcome: read here, or asyncio logs it as lost.
        done.add_done_callback(lambda future: future.cancelled() or future.exception())
        self._waiting.setdefault(namespace, []).append(_Write(decide, keys, ranges, done))
        if namespace not in self._runners:
            runner = asyncio.create_task(self._run(namespace), name=f"aiobootstrap etcd writes {namespace}")
            self._runners[namespace] = runner
        return await asyncio.shield(done)

    async def _run(self, namespace: str) -> None:
        """Send the namespace's waiting writes, a batch a transaction, until none waits."""
        try:
            while waiting := self._waiting.get(namespace):
                batch = _take(waiting)
                if not waiting:
                    del self._waiting[namespace]
                try:
                    await self._commit(namespace, batch)
                except asyncio.CancelledError:
                    for write in batch:
                        write.done.cancel()
                    raise
                except Exception as exc:
                    for write in batch:
                        if not write.done.done():
                            write.done.set_exception(exc)
        finally:
            del self._runners[namespace]

    async def stop(self) -> None:
        """Fail the writes still waiting (the store closes) and end the runners."""
        for writes in self._waiting.values():
            for write in writes:
                if not write.done.done():
                    write.done.set_exception(StoreUnavailable("The etcd store is closing."))
        self._waiting.clear()
        runners = list(self._runners.values())
        if runners:
            await asyncio.wait(runners, timeout=self._connection.timeout)
        for runner in runners:
            runner.cancel()

    async def _commit(self, namespace: str, batch: list[_Write]) -> None:
        k = self._keys
        keys = list(dict.fromkeys(key for write in batch for key in write.keys))
        ranges = list(dict.fromkeys(prefix for write in batch for prefix in write.ranges))
        for _ in range(_ATTEMPTS):
            state = await self.read(namespace, keys, ranges)
            plan = Plan(namespace, copy.deepcopy(state.meta), copy.copy(state.glob), self._limits)
            outcomes, ends = [], []
            for write in batch:
                outcomes.append(_decide(write, state, plan))
                ends.append(len(plan.ops))
            if len(batch) > 1 and m.request_bytes(plan.ops) > BATCH_BYTES:
                # Too many bytes for one transaction (large values at once): those that fit, then the rest.
                fit = _fitting(plan.ops, ends)
                await self._commit(namespace, batch[:fit])
                await self._commit(namespace, batch[fit:])
                return
            if plan.writes:
                meta_key = k.meta(namespace)
                compares = [
                    m.mod_is(k.boot, state.boot_mod),
                    m.mod_is(meta_key, state.meta.mod),
                    *plan.compares,
                ]
                ops = list(plan.ops)
                if plan.meta.records > 0:
                    ops.append(m.put(meta_key, plan.meta.encode()))
                elif state.meta.mod:
                    ops.append(m.delete(meta_key))
                    plan.glob.namespaces -= 1
                    plan.glob.floor = max(plan.glob.floor, plan.meta.version)
                    plan.touches_global = True
                if plan.touches_global:
                    compares.append(m.mod_is(k.globals, state.glob.mod))
                    ops.append(m.put(k.globals, plan.glob.encode()))
                if plan.changes:
                    ops.append(m.put(k.changes, encode_changes(namespace, plan.changes)))
                ops = _last_per_key(ops)
                if len(batch) > 1 and max(len(ops), len(compares)) > m.MAX_OPS:
                    # Too many for one transaction (a set record's many leases, say): in two halves.
                    half = len(batch) // 2
                    await self._commit(namespace, batch[:half])
                    await self._commit(namespace, batch[half:])
                    return
                try:
                    reply = await self._connection.call(m.txn(compares, ops))
                except StoreUnavailable as exc:
                    if not too_large(exc):
                        raise
                    if len(batch) > 1:  # a cluster whose limit is below ours: in halves
                        half = len(batch) // 2
                        await self._commit(namespace, batch[:half])
                        await self._commit(namespace, batch[half:])
                        return
                    size = m.request_bytes(ops) + m.request_bytes(compares)
                    _answer(batch[0], None, self._too_large(size, exc))
                    return
                if not reply.succeeded:
                    continue
                if plan.changes:
                    await self._feed.reached(reply.revision, self._connection.timeout)
            for write, (result, error) in zip(batch, outcomes, strict=True):
                _answer(write, result, error)
            return
        raise StoreUnavailable(f"etcd at {self._connection.where}: a write lost {_ATTEMPTS} races in a row.")

    def _too_large(self, size: int, refused: StoreUnavailable) -> PayloadTooLarge:
        error = PayloadTooLarge(
            f"The value is too large for etcd at {self._connection.where}: its write is {size:,} bytes as "
            f"stored (JSON, escapes included), past what etcd takes in one request (--max-request-bytes, "
            f"{m.MAX_REQUEST_BYTES:,} bytes unless the cluster sets more); nothing was stored."
        )
        error.__cause__ = refused
        return error


def _answer(write: _Write, result: Any, error: BaseException | None) -> None:
    """Settle ``write`` with its outcome (nothing when its caller has gone)."""
    if write.done.done():
        return
    if error is not None:
        write.done.set_exception(error)
    else:
        write.done.set_result(result)


def _fitting(ops: list[m.Op], ends: list[int]) -> int:
    """How many of a batch's first writes fit in :data:`BATCH_BYTES` (write ``i``'s operations end at
    ``ends[i]``): at least one, and never all (the batch did not fit)."""
    size, start, fit = 0, 0, 0
    for end in ends:
        size += m.request_bytes(ops[start:end])
        start = end
        if size > BATCH_BYTES:
            break
        fit += 1
    return min(max(fit, 1), len(ends) - 1)


def _take(waiting: list[_Write]) -> list[_Write]:
    """The writes of the next transaction, off the front of ``waiting``: a release alone (its reads are
    ranges), else up to :data:`BATCH` writes, within etcd's operations a transaction."""
    if waiting[0].ranges:
        return [waiting.pop(0)]
    count = 0
    while count < len(waiting) and count < BATCH and not waiting[count].ranges:
        count += 1
    batch = waiting[:count]
    del waiting[:count]
    return batch


def _last_per_key(ops: list[m.Op]) -> list[m.Op]:
    """Each key's last put or deletion only: etcd refuses a transaction naming a key twice, and the last
    is what the batch leaves (a set record changed by two writes of the batch, say)."""
    kept: list[m.Op] = []
    seen: set[bytes] = set()
    for op in reversed(ops):
        kind = op.WhichOneof("request")
        key = op.request_put.key if kind == "request_put" else op.request_delete_range.key
        if kind == "request_delete_range" and op.request_delete_range.range_end:
            kept.append(op)
        elif key not in seen:
            seen.add(key)
            kept.append(op)
    kept.reverse()
    return kept


def _decide(write: _Write, state: State, plan: Plan) -> tuple[Any, BaseException | None]:
    """``write``'s decision on ``state``, into ``plan``; a refusal leaves the plan as it was. The state then
    holds what the decision wrote, for the next decision of the batch."""
    saved = (
        copy.deepcopy(plan.meta),
        copy.copy(plan.glob),
        len(plan.ops),
        len(plan.compares),
        len(plan.changes),
    )
    flags = (plan.touches_global, plan.writes)
    try:
        result = write.decide(state, plan)
    except Exception as exc:  # a refusal (a limit, a lease gone), for this write alone
        plan.meta, plan.glob = saved[0], saved[1]
        del plan.ops[saved[2] :], plan.compares[saved[3] :], plan.changes[saved[4] :]
        plan.touches_global, plan.writes = flags
        return None, exc
    for op in plan.ops[saved[2] :]:
        kind = op.WhichOneof("request")
        if kind == "request_put":
            put = op.request_put
            state.found[put.key] = m.Found(put.key, put.value, 0)
        elif kind == "request_delete_range" and not op.request_delete_range.range_end:
            state.found[op.request_delete_range.key] = None
    return result, None
