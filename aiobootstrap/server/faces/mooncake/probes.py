"""Dead Mooncake engines leave: each engine's RPC address, probed as a peer engine probes it.

A transfer engine killed (SIGKILL, a crash, a lost machine) sends nothing:
its ``rpc_meta`` and ``ram`` keys would stay for ever (Mooncake's issue
#1078), and an engine restarted under its name is refused as a duplicate
(#863, #2296). With ``mooncake_probe_interval`` set, every ``rpc_meta`` key of
every namespace is probed each interval at the address it holds
(``ip_or_host_name:rpc_port``); after :data:`FAILURES_TO_FORGET` failures in a
row, that engine's ``rpc_meta`` and ``ram`` keys are deleted (changes that
wake waiters and watchers), unless it wrote its entry again meanwhile.

The probe is the engines' own: their handshake's probe frame (a little-endian
``uint64`` length, the type byte, a JSON body), its whole reply read before
the connection is closed. A bare connect-and-close would make a live engine
log two warnings a probe; this makes it log nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import struct
from collections.abc import AsyncIterator

from aiohttp import web

from ...._logging import clipped, printable
from ...._names import DEFAULT_ROLE
from ....core.registry import Registry
from ....exceptions import BootstrapError
from ....store import Key, Record
from ....wire.metadata import METADATA, decode_value, is_rpc_meta
from ...appkeys import CONFIG, REGISTRY
from ..rounds import every, running
from .settings import MooncakeSettings

__all__ = ["FAILURES_TO_FORGET", "MOONCAKE_PROBES", "MooncakeProbes", "mooncake_probes_context", "probe"]

log = logging.getLogger("aiobootstrap")

FAILURES_TO_FORGET = 3
"""Failed probes in a row after which an engine's keys are deleted."""
_PROBE = 3
"""The handshake's probe type (Mooncake's ``HandShakeRequestType::Probe``); the reply carries it back."""
_MAX_REPLY = 1 << 20
"""The largest reply a probe reads (the engines' own bound on a handshake message)."""
_AT_ONCE = 64
"""Probes in flight at once."""


async def probe(host: str, port: int, timeout: float) -> bool:
    """Whether an engine answers the handshake's probe at ``host:port`` within ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                body = b"{}\n"
                writer.write(struct.pack("<Q", len(body) + 1) + bytes([_PROBE]) + body)
                await writer.drain()
                head = await reader.readexactly(9)
                (length,) = struct.unpack("<Q", head[:8])
                if head[8] != _PROBE or not 1 <= length <= _MAX_REPLY:
                    return False
                await reader.readexactly(length - 1)
                # To the end: the engine shuts its side and waits for ours to close (else it logs).
                await reader.read()
                return True
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
        return False


def _address(record: Record) -> tuple[str, int] | None:
    """The RPC address an ``rpc_meta`` value holds, or ``None`` when it holds none."""
    try:
        value = json.loads(decode_value(record.value))
        host, port = value["ip_or_host_name"], value["rpc_port"]
    except (ValueError, TypeError, KeyError, BootstrapError):
        return None
    if (
        not isinstance(host, str)
        or isinstance(port, bool)
        or not isinstance(port, int)
        or not 0 < port < 65536
    ):
        return None
    return host, port


def ram_key(rpc: Key) -> Key:
    """The segment key of the engine whose RPC entry is ``rpc`` (``.../rpc_meta/NAME`` -> ``.../ram/NAME``)."""
    name = rpc.name or ""
    head, _, tail = name.rpartition("rpc_meta/")
    return Key.named(rpc.namespace, rpc.kind, rpc.role, f"{head}ram/{tail}")


class MooncakeProbes:
    """One app's prober: the failures in a row of each RPC entry, by its key and version."""

    def __init__(self, registry: Registry, timeout: float) -> None:
        self._registry = registry
        self._timeout = timeout
        self._failures: dict[Key, tuple[int, int]] = {}
        self._slots = asyncio.Semaphore(_AT_ONCE)

    def failures(self, key: Key) -> int:
        """The failed probes in a row of the RPC entry under ``key`` (0: answering, or not probed yet)."""
        return self._failures.get(key, (0, 0))[1]

    async def run(self, interval: float) -> None:
        """Probe every ``interval`` seconds until cancelled; a round that fails is logged, not fatal."""
        await every(interval, self.round, self._registry, "Mooncake probe")

    async def round(self) -> None:
        """Probe every RPC entry of every namespace once, and forget the engines that failed too often."""
        entries: list[Record] = []
        for namespace in await self._registry.namespaces():
            records = await self._registry.records(namespace, METADATA, DEFAULT_ROLE)
            entries += [record for record in records if is_rpc_meta(record.name or "")]
        answered = await asyncio.gather(*(self._probe(record) for record in entries))
        seen = {record.key for record in entries}
        self._failures = {key: held for key, held in self._failures.items() if key in seen}
        for record, ok in zip(entries, answered, strict=True):
            if ok:
                self._failures.pop(record.key, None)
                continue
            version, count = self._failures.get(record.key, (record.version, 0))
            count = count + 1 if version == record.version else 1
            self._failures[record.key] = (record.version, count)
            if count >= FAILURES_TO_FORGET:
                await self._forget(record, count)

    async def _probe(self, record: Record) -> bool:
        address = _address(record)
        if address is None:
            return True  # not an address to probe: left alone
        async with self._slots:
            return await probe(*address, self._timeout)

    async def _forget(self, record: Record, failures: int) -> None:
        current = await self._registry.get(record.key)
        if current is None or current.version != record.version:
            return  # written again (the engine restarted), or deleted, meanwhile
        await self._registry.unregister(record.key)
        await self._registry.unregister(ram_key(record.key))
        self._failures.pop(record.key, None)
        log.warning(
            "forgot Mooncake engine %s after %d failed probes of its RPC address",
            printable(clipped(record.name or "")),
            failures,
            extra={"namespace": record.key.namespace},
        )


async def mooncake_probes_context(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx``: the prober, when ``mooncake_probe_interval`` is not 0."""
    config = app[CONFIG].settings_of(MooncakeSettings)
    if not config.mooncake_probe_interval:
        yield
        return
    probes = app[MOONCAKE_PROBES] = MooncakeProbes(app[REGISTRY], config.mooncake_probe_timeout)
    async with running(probes.run(config.mooncake_probe_interval), "aiobootstrap mooncake probes"):
        yield


MOONCAKE_PROBES = web.AppKey("mooncake_probes", MooncakeProbes)
"""The app's prober, when probing is on (``GET /mooncake`` shows its failures)."""
