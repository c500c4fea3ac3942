"""Dead Mooncake engines leave: each engine's RPC address, probed as a peer engine probes it.

A transfer engine killed (SIGKILL, a crash, a lost machine) sends nothing:
its ``rpc_meta`` and ``ram`` keys would stay for ever (Mooncake's issue
#1078), and an engine restarted under its name is refused as a duplicate
(#863, #2296). With ``mooncake_probe_interval`` set, every ``rpc_meta`` key of
every namespace is probed at the address it holds (``ip_or_host_name:rpc_port``,
``rpc_probe.py``); after :data:`FAILURES_TO_FORGET` failures in a row, that
engine's ``rpc_meta`` and ``ram`` keys are deleted (changes that wake waiters
and watchers), unless it wrote its entry again meanwhile.

Bounded, and the loop never blocked:

- A value's address is read once per version (a namespace's list of entries
  is read again only when its version moved), and only from a value of at
  most ``RPC_META_LIMIT`` characters: a big value costs a round nothing.
- A round starts no probe past its budget (the interval, at least the
  probe timeout), with up to :func:`probes_at_once` in flight; the entries
  it did not reach go first next round, and the namespaces take turns, so an
  engine in a namespace of a few is probed every round however many entries
  another namespace holds.
- A probe has its timeout of the loop's own time (``rounds.in_own_time``):
  a loop held up past its deadline (a reply may be sitting unread in the
  socket) moves the deadline on; one that never gives it its time is not
  counted either way.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Sequence
from typing import NamedTuple

from aiohttp import web

from ...._logging import clipped, printable
from ...._names import DEFAULT_ROLE
from ....core.registry import Registry
from ....store import Key
from ....wire.metadata import METADATA, is_rpc_meta
from ...appkeys import CONFIG, REGISTRY
from ...open_files import open_file_limit
from ..rounds import HeldUp, every, running
from .rpc_probe import probe, rpc_address
from .settings import MooncakeSettings, Networks, parse_networks

__all__ = [
    "FAILURES_TO_FORGET",
    "MOONCAKE_PROBES",
    "MooncakeProbes",
    "mooncake_probes_context",
    "probe",
    "probes_at_once",
    "ram_key",
]

log = logging.getLogger("aiobootstrap")

FAILURES_TO_FORGET = 3
"""Failed probes in a row after which an engine's keys are deleted."""


def probes_at_once() -> int:
    """Probes in flight at once: 1,024, or an eighth of the open file limit when that is less (each holds a
    socket; the server raises its limit at start)."""
    limit = open_file_limit()
    return 1024 if limit is None else max(16, min(1024, limit // 8))


class _Entry(NamedTuple):
    """An ``rpc_meta`` key to probe: its key, the version its address was read from, the address."""

    key: Key
    version: int
    address: tuple[str, int]


class _Listing(NamedTuple):
    """A namespace's entries as of its version, and the address each ``rpc_meta`` key's version holds."""

    incarnation: str
    version: int
    entries: list[_Entry]
    addresses: dict[Key, tuple[int, tuple[str, int] | None]]


def ram_key(rpc: Key) -> Key:
    """The segment key of the engine whose RPC entry is ``rpc`` (``.../rpc_meta/NAME`` -> ``.../ram/NAME``)."""
    name = rpc.name or ""
    head, _, tail = name.rpartition("rpc_meta/")
    return Key.named(rpc.namespace, rpc.kind, rpc.role, f"{head}ram/{tail}")


class MooncakeProbes:
    """One app's prober: the failures in a row of each RPC entry, by its key and version.

    ``timeout``: seconds a probe may take; ``round_seconds``: the time after a round's start past which
    it starts no probe (default: ``timeout``); ``at_once``: probes in flight (default:
    :func:`probes_at_once`); ``networks``: the only networks probed (default: any address).
    """

    def __init__(
        self,
        registry: Registry,
        timeout: float,
        *,
        round_seconds: float | None = None,
        at_once: int | None = None,
        networks: Networks = (),
    ) -> None:
        self._registry = registry
        self._timeout = timeout
        self._round_seconds = max(timeout, round_seconds or 0.0)
        self._at_once = at_once or probes_at_once()
        self._networks = networks
        self._failures: dict[Key, tuple[int, int]] = {}
        self._listings: dict[str, _Listing] = {}
        self._probed: dict[Key, int] = {}
        self._rounds = 0

    def failures(self, key: Key) -> int:
        """The failed probes in a row of the RPC entry under ``key`` (0: answering, or not probed yet)."""
        return self._failures.get(key, (0, 0))[1]

    async def run(self, interval: float) -> None:
        """Probe every ``interval`` seconds until cancelled; a round that fails is logged, not fatal."""
        await every(interval, self.round, self._registry, "Mooncake probe")

    async def round(self) -> None:
        """Probe the RPC entries of every namespace once, within the round's budget, and forget the
        engines that failed too often."""
        self._rounds += 1
        namespaces = await self._registry.namespaces()
        listings = [await self._entries(namespace) for namespace in namespaces]
        self._keep_only(set(namespaces), {entry.key for entries in listings for entry in entries})
        queues = [sorted(entries, key=lambda entry: self._probed.get(entry.key, 0)) for entries in listings]
        order = [entry for turn in itertools.zip_longest(*queues) for entry in turn if entry is not None]
        results = await self._probe_all(order)
        for entry, answered in results:
            if answered is None:
                continue  # not probed, or not conclusive: the count stays
            if answered:
                self._failures.pop(entry.key, None)
                continue
            version, count = self._failures.get(entry.key, (entry.version, 0))
            count = count + 1 if version == entry.version else 1
            self._failures[entry.key] = (entry.version, count)
            if count >= FAILURES_TO_FORGET:
                await self._forget(entry, count)

    async def _entries(self, namespace: str) -> list[_Entry]:
        """The namespace's entries to probe, read again only when its version moved (read first: the
        records read after it hold every change up to it); each value's address read once a version."""
        version = await self._registry.version(namespace)
        held = self._listings.get(namespace)
        incarnation = self._registry.incarnation
        if held is not None and held.incarnation == incarnation and held.version == version:
            return held.entries
        records = await self._registry.records(namespace, METADATA, DEFAULT_ROLE)
        before = {} if held is None else held.addresses
        addresses: dict[Key, tuple[int, tuple[str, int] | None]] = {}
        entries = []
        for record in records:
            if not is_rpc_meta(record.name or ""):
                continue
            known = before.get(record.key)
            if known is None or known[0] != record.version:
                known = (record.version, rpc_address(record.value, self._networks))
            addresses[record.key] = known
            if known[1] is not None:
                entries.append(_Entry(record.key, record.version, known[1]))
        self._listings[namespace] = _Listing(incarnation, version, entries, addresses)
        return entries

    def _keep_only(self, namespaces: set[str], keys: set[Key]) -> None:
        """Forget what is held of the namespaces and the keys no longer there."""
        self._listings = {name: held for name, held in self._listings.items() if name in namespaces}
        self._failures = {key: held for key, held in self._failures.items() if key in keys}
        self._probed = {key: held for key, held in self._probed.items() if key in keys}

    async def _probe_all(self, order: Sequence[_Entry]) -> list[tuple[_Entry, bool | None]]:
        """Probe ``order`` up to ``at_once`` at a time, starting none past the round's budget."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._round_seconds
        slots = asyncio.Semaphore(self._at_once)
        results: list[tuple[_Entry, bool | None]] = []
        held_up = 0

        async def one(entry: _Entry) -> None:
            nonlocal held_up
            try:
                answered = await probe(*entry.address, self._timeout, self._networks)
            except HeldUp:
                answered = None
                held_up += 1
            finally:
                slots.release()
            self._probed[entry.key] = self._rounds
            results.append((entry, answered))

        async with asyncio.TaskGroup() as group:
            for entry in order:
                await slots.acquire()
                if loop.time() >= deadline:
                    slots.release()
                    break
                group.create_task(one(entry))
        if held_up:
            log.warning(
                "Mooncake probes: %d probes not judged: the server's loop was held up as long as they were given",
                held_up,
            )
        return results

    async def _forget(self, entry: _Entry, failures: int) -> None:
        current = await self._registry.get(entry.key)
        if current is None or current.version != entry.version:
            return  # written again (the engine restarted), or deleted, meanwhile
        await self._registry.unregister(entry.key)
        await self._registry.unregister(ram_key(entry.key))
        self._failures.pop(entry.key, None)
        log.warning(
            "forgot Mooncake engine %s after %d failed probes of its RPC address",
            printable(clipped(entry.key.name or "")),
            failures,
            extra={"namespace": entry.key.namespace},
        )


async def mooncake_probes_context(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx``: the prober, when ``mooncake_probe_interval`` is not 0."""
    config = app[CONFIG].settings_of(MooncakeSettings)
    if not config.mooncake_probe_interval:
        yield
        return
    probes = app[MOONCAKE_PROBES] = MooncakeProbes(
        app[REGISTRY],
        config.mooncake_probe_timeout,
        round_seconds=config.mooncake_probe_interval,
        networks=parse_networks(config.mooncake_probe_networks),
    )
    async with running(probes.run(config.mooncake_probe_interval), "aiobootstrap mooncake probes"):
        yield


MOONCAKE_PROBES = web.AppKey("mooncake_probes", MooncakeProbes)
"""The app's prober, when probing is on (``GET /mooncake`` shows its failures)."""
