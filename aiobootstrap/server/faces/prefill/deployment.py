"""A prefill deployment in the registry: its topology record, its ranks' records, and the waits on them.

One namespace holds one deployment (SGLang's one bootstrap server per prefill
instance): a ``prefill_topology`` record named ``topology``, fixed by the first
rank that registers (``register_if`` with ``ABSENT``, so one step across
replicas), and a ``prefill_rank`` record per rank, named by its coordinates.
Readiness is the count of distinct rank records reaching the topology's
product of sizes: a rank registering twice replaces its record and counts once.
A topology whose ranks have all gone is replaced by the next registration
(the deployment left with its last rank). Fixing the topology and storing the
first rank are two writes, so a topology without ranks may be one whose first
rank is being stored right now (through another replica, on a loaded
machine): a contradicting rank waits up to ``LEFT_AFTER`` seconds for a rank to
arrive (a core condition, no polling) before it takes the deployment for gone.
The fields passed through to decode (``wire.prefill_fields``) live in the
topology record: a rank that agrees with the topology but sends a field the
deployment lacks adds it in the same one step; one that sends another value
of a field is told apart the same way (kept first value and a WARNING while
the deployment has ranks; a new deployment once it has none).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, replace
from typing import Any

from ...._names import DEFAULT_ROLE
from ....core.registry import AtLeast, Registry
from ....exceptions import TopologyConflict
from ....store import ABSENT, Key, Record
from ....wire.prefill import PREFILL_RANK, PREFILL_TOPOLOGY, TOPOLOGY_NAME, Coords, PrefillRank, Topology
from ....wire.prefill_fields import differing, joined
from .parallel_info import made

__all__ = ["LEFT_AFTER", "Deployment", "Readiness", "rank_key", "topology_key"]

log = logging.getLogger("aiobootstrap")

LEFT_AFTER = 2.0
"""Seconds a topology without ranks is given for its first rank to arrive before a contradicting rank replaces
it (issue 41, item 2: the two first writes of two deployments at once through two replicas)."""


@functools.lru_cache(maxsize=1024)
def topology_key(namespace: str) -> Key:
    """The key of ``namespace``'s topology record (made once: every ``GET /route`` reads it)."""
    return Key.named(namespace, PREFILL_TOPOLOGY, DEFAULT_ROLE, TOPOLOGY_NAME)


def rank_key(namespace: str, coords: Coords) -> Key:
    return Key.named(namespace, PREFILL_RANK, DEFAULT_ROLE, coords.name)


def _says_more(kept: Topology, sent: Topology) -> bool:
    """Whether a rank that agrees with the deployment's topology says something else of it: a field passed
    through that the deployment lacks or holds with another value, or another balance method (kept from the
    first rank while the deployment has ranks; the first rank of a new deployment, once they have all gone,
    brings its own)."""
    fields = dict(kept.fields)
    return kept.follow_bootstrap_room != sent.follow_bootstrap_room or any(
        name not in fields or fields[name] != value for name, value in sent.fields
    )


def _warn_differing(namespace: str, rank: PrefillRank, fixed: Topology) -> None:
    """The WARNING of a rank whose passed fields differ from those its deployment keeps (SGLang keeps the
    first silently; a deployment whose ranks disagree is worth a line)."""
    said = differing(dict(fixed.fields), rank.topology.fields)
    if said:
        log.warning(
            "prefill rank %s sent %s: the first value is kept",
            rank.coords.name,
            "; ".join(said),
            extra={"namespace": namespace},
        )


@dataclass(slots=True)
class Readiness:
    """Where a deployment stands: its topology (``None`` before the first rank) and its distinct ranks."""

    topology: Topology | None
    registered: int
    info: bytes = b""
    """The parallel info's bytes (``GET /route`` with the four ``-1``s), one object per topology version."""

    @property
    def complete(self) -> bool:
        return self.topology is not None and self.registered >= self.topology.expected


class Deployment:
    """One namespace's prefill deployment, read and written through the registry."""

    def __init__(self, registry: Registry, namespace: str) -> None:
        self._registry = registry
        self.namespace = namespace

    async def register(self, rank: PrefillRank, lease: str | None) -> Record:
        """Store ``rank``, fixing the topology if none is; :class:`TopologyConflict` if it contradicts it.

        The fields passed through to decode (``wire.prefill_fields``) are fixed by the first rank that sends
        each: a rank sending one the deployment lacks adds it to the topology record, in the same one step
        (``register_if`` at the version read) that keeps the first value of every other across replicas."""
        registry, key = self._registry, topology_key(self.namespace)
        while True:
            current = await registry.get(key)
            value: dict[str, Any] | None
            kept: Topology | None
            if current is None:
                value, kept = rank.topology.as_value(), None
            else:
                value, kept = await self._next(made(current).topology, rank)  # parsed once per version
            version = ABSENT if current is None else current.version
            if value is None or await registry.register_if(key, value, version) is not None:
                break
            # Another rank wrote it meanwhile, here or through another replica: read it again.
        if kept is not None:
            _warn_differing(self.namespace, rank, kept)
        return await registry.register(rank_key(self.namespace, rank.coords), rank.value, lease)

    async def _next(self, kept: Topology, rank: PrefillRank) -> tuple[dict[str, Any] | None, Topology | None]:
        """The deployment's topology record to write for ``rank`` (``None``: it holds all the rank says), and
        the topology whose values are kept (``None``: the rank's replaces it); :class:`TopologyConflict`."""
        problem = kept.contradiction(rank.topology)
        if problem is None and not _says_more(kept, rank.topology):
            return None, kept
        if await self._left():
            # Every rank of the deployment has gone (a DELETE, their leases): this rank starts it anew, with its
            # own sizes and fields (a redeployed prefill's new prefill_http_port...).
            return rank.topology.as_value(), None
        if problem is not None:
            raise TopologyConflict(problem)
        fields = joined(dict(kept.fields), rank.topology.fields)
        return (None if fields is None else replace(kept, fields=tuple(fields.items())).as_value()), kept

    async def _left(self) -> bool:
        """Whether the deployment has no rank, and none comes within ``LEFT_AFTER`` seconds (a topology without
        ranks may be one whose first rank is being stored right now, through another replica)."""
        return not await self.registered() and not await self._registry.wait_until(
            AtLeast(self.namespace, PREFILL_RANK, DEFAULT_ROLE, 1), LEFT_AFTER
        )

    async def unregister(self, coords: Coords) -> Record | None:
        """Delete one rank; the topology goes with the deployment's last rank."""
        record = await self._registry.unregister(rank_key(self.namespace, coords))
        if record is not None and not await self.registered():
            await self._registry.unregister(topology_key(self.namespace))
        return record

    async def unregister_all(self) -> int:
        """Delete every rank and the topology; how many records went."""
        ranks = await self._registry.records(self.namespace, PREFILL_RANK, DEFAULT_ROLE)
        gone = 0
        for record in ranks:
            gone += await self._registry.unregister(record.key) is not None
        gone += await self._registry.unregister(topology_key(self.namespace)) is not None
        return gone

    async def registered(self) -> int:
        return await self._registry.count(self.namespace, PREFILL_RANK, DEFAULT_ROLE)

    async def readiness(self) -> Readiness:
        record = await self._registry.get(topology_key(self.namespace))
        registered = await self.registered()
        if record is None:
            return Readiness(None, registered)
        topology = made(record)  # parsed, and the parallel info encoded, once per version of the record
        return Readiness(topology.topology, registered, topology.info)

    async def ranks(self) -> list[Record]:
        """Every rank registered, in the store's order."""
        return await self._registry.records(self.namespace, PREFILL_RANK, DEFAULT_ROLE)

    async def rank(self, coords: Coords) -> Record | None:
        return await self._registry.get(rank_key(self.namespace, coords))

    async def wait_rank(self, coords: Coords, timeout: float) -> Record | None:
        return await self._registry.wait(rank_key(self.namespace, coords), timeout)

    async def wait_complete(self, timeout: float) -> Readiness:
        """The readiness once the topology is complete, or at ``timeout``.

        The ranks are counted by the core as they arrive (:class:`AtLeast`: one read seeds the count, shared
        by every decode waiting on this deployment), never read again per arrival; the readiness is read
        again once the count is reached (the deployment may have been replaced meanwhile)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        registry = self._registry
        while True:
            readiness = await self.readiness()
            remaining = deadline - loop.time()
            if readiness.complete or remaining <= 0:
                return readiness
            if readiness.topology is None:
                await registry.wait(topology_key(self.namespace), remaining)
                continue
            expected = readiness.topology.expected
            await registry.wait_until(
                AtLeast(self.namespace, PREFILL_RANK, DEFAULT_ROLE, expected), remaining
            )
