"""A namespace's vLLM workers in the registry: one record per worker, one claim per dp rank, and who may
take a held dp rank over.

A worker is a ``vllm_worker`` record named by its ranks (``dp0-tp1-pp0``),
its value the registration's five fields. A dp rank is held by one engine:
its ``vllm_claim`` record (named ``dp0``: the engine, and the address of the
worker that claimed it) is written compare-and-set (``register_if``), so of
two engines registering one dp rank at once, through one replica or two,
one wins and the other reads again and decides anew.

Another engine on a held dp rank is vLLM's ``400`` mismatch while the holder
lives: while one of its workers on that dp rank answers a TCP connect (vLLM's
side channel, a ZMQ ROUTER, drops a bare connection without logging). When
none answers, the new engine takes the dp rank over: the claim first, then
the holder's workers are deleted (a change on ``/watch`` each). A claim with
no worker left is free, unless it is younger than :data:`CLAIM_GRACE` and its
claiming worker answers (its first record may be on its way right now).
``/query`` is read from the workers alone, one engine per dp rank
(:func:`current`), so a dp rank whose last worker left is gone from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Sequence

from ...._logging import clipped, printable
from ...._names import DEFAULT_ROLE
from ....core.registry import Registry
from ....exceptions import BadRequest
from ....store import ABSENT, Key, Record
from ....wire.vllm import VLLM_CLAIM, VLLM_WORKER, Worker, claim_name, mismatch_detail
from ..rounds import HeldUp, in_own_time

__all__ = [
    "CLAIM_GRACE",
    "answers",
    "claim_key",
    "current",
    "forget",
    "register",
    "tcp_address",
    "worker_key",
    "workers_of",
]

log = logging.getLogger("aiobootstrap")

CLAIM_GRACE = 2.0
"""Seconds a claim without workers is held for its claiming worker, if that worker answers: the claim and the
first worker's record are two writes, and another engine may read between them."""


def worker_key(namespace: str, worker: Worker) -> Key:
    return Key.named(namespace, VLLM_WORKER, DEFAULT_ROLE, worker.name)


def claim_key(namespace: str, dp_rank: int) -> Key:
    return Key.named(namespace, VLLM_CLAIM, DEFAULT_ROLE, claim_name(dp_rank))


def _said(text: object) -> str:
    return printable(clipped(str(text)))


def tcp_address(addr: str) -> tuple[str, int] | None:
    """The host and port of a worker's ``tcp://host:port`` (``[v6]`` too); ``None`` for anything else."""
    rest = addr.removeprefix("tcp://")
    host, _, port = rest.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not (port.isascii() and port.isdecimal()) or not 0 < int(port) < 65536:
        return None
    return host, int(port)


async def answers(addr: str, timeout: float) -> bool | None:
    """Whether something accepts a TCP connection at ``addr`` within ``timeout`` seconds of the loop's own
    time (closed at once); ``None`` when the loop was held up so long that the connect never had its time
    (``rounds.in_own_time``): no answer either way."""
    address = tcp_address(addr)
    if address is None:
        return False  # not an address anything answers at (vLLM's worker registers tcp://host:port)
    try:
        _, writer = await in_own_time(asyncio.open_connection(*address), timeout)
    except HeldUp:
        return None
    except (OSError, TimeoutError, ValueError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def any_answers(addrs: Iterable[str], timeout: float) -> bool:
    """Whether one of ``addrs`` answers (:func:`answers`), told as soon as one does; a connect the loop kept
    from its time counts as an answer (a worker that may live is never taken over)."""
    pending = {asyncio.ensure_future(answers(addr, timeout)) for addr in set(addrs)}
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if any(task.result() is not False for task in done):
                return True
        return False
    finally:
        for task in pending:
            task.cancel()


def workers_of(records: Sequence[Record]) -> list[tuple[Record, Worker]]:
    """The records that hold a worker, each with it (a record written by something else is left out)."""
    found = []
    for record in records:
        try:
            found.append((record, Worker.from_value(record.value)))
        except BadRequest:
            continue
    return found


def current(records: Sequence[Record]) -> list[Worker]:
    """The workers ``/query`` shows: per dp rank, those of the engine of its newest record (a takeover
    deletes the old engine's, so there is one engine per dp rank but for the moment between two writes)."""
    held = workers_of(records)
    newest: dict[int, tuple[int, str]] = {}
    for record, worker in held:
        if record.version > newest.get(worker.dp_rank, (0, ""))[0]:
            newest[worker.dp_rank] = (record.version, worker.engine_id)
    return [worker for _, worker in held if worker.engine_id == newest[worker.dp_rank][1]]


async def _held(registry: Registry, namespace: str, claim: Record, dp_rank: int, timeout: float) -> bool:
    """Whether the engine of ``claim`` still holds ``dp_rank``: one of its workers there answers."""
    holder = claim.value.get("engine_id")
    records = await registry.records(namespace, VLLM_WORKER, DEFAULT_ROLE)
    addrs = [w.addr for _, w in workers_of(records) if w.dp_rank == dp_rank and w.engine_id == holder]
    if not addrs:
        first = claim.value.get("addr")
        if time.time() - claim.registered_at >= CLAIM_GRACE or not isinstance(first, str):
            return False  # its last worker left: the claim is free
        addrs = [first]
    return await any_answers(addrs, timeout)


async def _take_over(registry: Registry, namespace: str, worker: Worker, holder: str) -> None:
    """Delete ``holder``'s workers on ``worker``'s dp rank, now ``worker``'s engine's (the claim is written)."""
    records = await registry.records(namespace, VLLM_WORKER, DEFAULT_ROLE)
    old = [
        r for r, w in workers_of(records) if w.dp_rank == worker.dp_rank and w.engine_id != worker.engine_id
    ]
    for record in old:
        await registry.unregister(record.key)
    log.warning(
        "vLLM engine %s takes dp_rank=%d over from engine %s, none of whose workers answers (%d deleted)",
        _said(worker.engine_id),
        worker.dp_rank,
        _said(holder),
        len(old),
        extra={"namespace": namespace},
    )


async def register(
    registry: Registry, namespace: str, worker: Worker, lease: str | None, timeout: float
) -> Record | None:
    """Store ``worker`` (its record); ``BadRequest`` (vLLM's mismatch) when another live engine holds its dp
    rank.

    The same worker at the same address, without a lease, changes nothing (``None``); at a new address it
    replaces the old (a ``WARNING`` naming both)."""
    key, ckey = worker_key(namespace, worker), claim_key(namespace, worker.dp_rank)
    claimed = {"engine_id": worker.engine_id, "addr": worker.addr}
    while True:
        claim, stored = await registry.get_many([ckey, key])
        if claim is None:
            if await registry.register_if(ckey, claimed, ABSENT) is None:
                continue  # another engine claimed it meanwhile, here or through another replica
        elif claim.value.get("engine_id") != worker.engine_id:
            holder = str(claim.value.get("engine_id"))
            if await _held(registry, namespace, claim, worker.dp_rank, timeout):
                raise BadRequest(mismatch_detail(worker.dp_rank, holder, worker.engine_id))
            if await registry.register_if(ckey, claimed, claim.version) is None:
                continue
            await _take_over(registry, namespace, worker, holder)
            stored = await registry.get(key)
        break
    if stored is not None and stored.value == worker.as_value() and lease is None:
        return None
    record = await registry.register(key, worker.as_value(), lease)
    old = None if stored is None else stored.value.get("addr")
    if old is not None and old != worker.addr and stored is not None:
        log.warning(
            "vLLM worker %s of engine %s moved from %s to %s",
            worker.says(),
            _said(worker.engine_id),
            _said(old),
            _said(worker.addr),
            extra={"namespace": namespace, "version": record.version},
        )
    return record


async def forget(registry: Registry, record: Record) -> Record | None:
    """Delete a worker's record if it is still at ``record``'s version; what was deleted, here (``None``: it
    was written again or deleted meanwhile, by this replica or another)."""
    stored = await registry.get(record.key)
    if stored is None or stored.version != record.version:
        return None
    deleted = await registry.unregister(record.key)
    if deleted is not None and deleted.version != record.version:
        # It registered again between the read and the delete: put it back, unless it did once more.
        await registry.register_if(record.key, deleted.value, ABSENT)
        return None
    return deleted
