"""Dead vLLM workers leave: each worker's side channel (``tcp://host:port``, a ZMQ ROUTER) connected to
every ``vllm_probe_interval`` seconds.

A prefill worker killed sends nothing: its address would stay in ``/query``
for ever, and decode would send its transfers there. With probing on, every
worker of every namespace is connected to each interval (a bare TCP connect,
closed at once: a ZMQ ROUTER drops it without logging); after
:data:`FAILURES_TO_FORGET` failures in a row its record is deleted, unless it
registered again meanwhile. Replicas each probe; the delete compares the
version probed, so one replica deletes and logs, the others find it gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from ...._names import DEFAULT_ROLE
from ....core.registry import Registry
from ....store import Key, Record
from ....wire.vllm import VLLM_WORKER
from ...appkeys import CONFIG, REGISTRY
from ..rounds import every, running
from .settings import VllmSettings
from .workers import answers, forget, workers_of

__all__ = ["FAILURES_TO_FORGET", "VLLM_PROBES", "VllmProbes", "vllm_probes_context"]

log = logging.getLogger("aiobootstrap")

FAILURES_TO_FORGET = 3
"""Failed connects in a row after which a worker's record is deleted."""
_AT_ONCE = 64
"""Connects in flight at once."""


class VllmProbes:
    """One app's prober: the failures in a row of each worker, by its key and the version probed."""

    def __init__(self, registry: Registry, timeout: float) -> None:
        self._registry = registry
        self._timeout = timeout
        self._failures: dict[Key, tuple[int, int]] = {}
        self._slots = asyncio.Semaphore(_AT_ONCE)

    def failures(self, key: Key) -> int:
        """The failed connects in a row of the worker under ``key`` (0: answering, or not probed yet)."""
        return self._failures.get(key, (0, 0))[1]

    async def run(self, interval: float) -> None:
        """Probe every ``interval`` seconds until cancelled; a round that fails is logged, not fatal."""
        await every(interval, self.round, self._registry, "vLLM probe")

    async def round(self) -> None:
        """Connect to every worker of every namespace once, and forget the workers that failed too often."""
        held: list[tuple[Record, str]] = []
        for namespace in await self._registry.namespaces():
            records = await self._registry.records(namespace, VLLM_WORKER, DEFAULT_ROLE)
            held += [(record, worker.addr) for record, worker in workers_of(records)]
        answered = await asyncio.gather(*(self._probe(addr) for _, addr in held))
        seen = {record.key for record, _ in held}
        self._failures = {key: kept for key, kept in self._failures.items() if key in seen}
        for (record, addr), ok in zip(held, answered, strict=True):
            if ok is None:
                continue  # the loop was held up past the connect's time: no answer, counted neither way
            if ok:
                self._failures.pop(record.key, None)
                continue
            version, count = self._failures.get(record.key, (record.version, 0))
            count = count + 1 if version == record.version else 1
            self._failures[record.key] = (record.version, count)
            if count >= FAILURES_TO_FORGET and await forget(self._registry, record) is not None:
                self._failures.pop(record.key, None)
                log.warning(
                    "forgot vLLM worker %s at %s after %d failed connects",
                    record.name,
                    addr,
                    count,
                    extra={"namespace": record.key.namespace},
                )

    async def _probe(self, addr: str) -> bool | None:
        async with self._slots:
            return await answers(addr, self._timeout)


async def vllm_probes_context(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx``: the prober, when ``vllm_probe_interval`` is not 0."""
    config = app[CONFIG].settings_of(VllmSettings)
    if not config.vllm_probe_interval:
        yield
        return
    probes = app[VLLM_PROBES] = VllmProbes(app[REGISTRY], config.vllm_probe_timeout)
    async with running(probes.run(config.vllm_probe_interval), "aiobootstrap vllm probes"):
        yield


VLLM_PROBES = web.AppKey("vllm_probes", VllmProbes)
"""The app's prober, when probing is on (``GET /vllm`` shows its failures)."""
