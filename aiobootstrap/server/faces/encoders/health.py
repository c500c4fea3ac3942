"""Dead encoders leave the list: the encoder URLs probed, evicted and revived.

Theory of operation
-------------------
Every ``encoder_health_interval`` seconds one task per app sends
``GET <url>/health`` to every listed and every evicted URL of every
namespace, concurrently (at most :data:`MAX_PROBES` at once), each with an
``encoder_health_timeout``; a ``200`` in time is healthy, anything else a
failure. As in the engines' own encoder bootstrap server:

- :data:`FAILURES_TO_EVICT` consecutive failures of a listed URL evict it: it
  leaves the list (a change with a new version, which wakes list waiters and
  watchers) and joins the namespace's *evicted set*. A success resets the count.
- An evicted URL that answers ``200`` again returns to the list; one evicted
  for ``encoder_evicted_ttl`` seconds (``0``: for ever) leaves the evicted set,
  and is probed no more.
- An explicit register (:func:`add_url`) takes a URL out of the evicted set
  and lists it at once; an unregister (:func:`remove_url`) takes it out of
  both, which ends its probing.

The evicted set is a set record of the store (role ``evicted`` of the
encoder list's kind), not this process's memory, so that replicas sharing a
store agree on it: any replica revives an evicted URL, and an unregister
through one ends probing in all. Each change is a :meth:`Store.set_member`,
atomic in the store and a no-op when already made, so an eviction or a
revival that several replicas make at once is one change of the list. The
failure counts and the eviction clocks are each replica's own. Two changes
of two records are not one atomic step: an unregister that lands between a
probe's re-read and its write may see the URL evicted (or revived) once more.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from ...._logging import printable
from ...._names import ENCODER_URLS
from ....core.registry import Registry
from ....core.tally import Tally
from ....store import Key, Record, members_of
from ...appkeys import CONFIG, PROBE_CHANGES, REGISTRY
from ..rounds import every, running
from .keys import encoder_list_key
from .settings import EncoderSettings

__all__ = [
    "ENCODER_HEALTH",
    "EVICTED_ROLE",
    "FAILURES_TO_EVICT",
    "MAX_PROBES",
    "EncoderHealth",
    "add_url",
    "encoder_health_context",
    "evicted_key",
    "remove_url",
]

log = logging.getLogger("aiobootstrap")

FAILURES_TO_EVICT = 3
"""Consecutive failed probes that evict a listed URL: the engines' count."""
MAX_PROBES = 64
"""Probes in flight at once, all namespaces together."""
EVICTED_ROLE = "evicted"
"""The role of a namespace's evicted set, beside its list (role ``target``)."""


def evicted_key(namespace: str) -> Key:
    """The key of ``namespace``'s evicted encoder URLs: still probed, not listed."""
    return Key(namespace, ENCODER_URLS, EVICTED_ROLE, 0)


def _has(record: Record | None, url: str) -> bool:
    return url in members_of(None if record is None else record.value)


async def add_url(registry: Registry, namespace: str, url: str, *, lease: str | None = None) -> bool:
    """Register ``url``: listed (held by ``lease``, if given), and out of the evicted set; ``True`` when
    the list changed."""
    key = encoder_list_key(namespace)
    listed = _has(await registry.get(key), url)
    await registry.set_member(key, url, present=True, lease=lease)
    await registry.set_member(evicted_key(namespace), url, present=False)
    return not listed


async def remove_url(registry: Registry, namespace: str, url: str) -> bool:
    """Unregister ``url``: out of the list and the evicted set (no more probes); ``True`` if it was in either."""
    key, evicted = encoder_list_key(namespace), evicted_key(namespace)
    was_there = any(_has(record, url) for record in await registry.get_many([key, evicted]))
    # The evicted set first: a probe that reads it afterwards cannot revive the URL.
    await registry.set_member(evicted, url, present=False)
    await registry.set_member(key, url, present=False)
    return was_there


class EncoderHealth:
    """The prober of one app: its failure counts and eviction clocks, and one round of probes."""

    def __init__(
        self, registry: Registry, session: aiohttp.ClientSession, *, timeout: float, evicted_ttl: float
    ) -> None:
        self._registry = registry
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._evicted_ttl = evicted_ttl
        self._probes = asyncio.Semaphore(MAX_PROBES)
        self._failures: dict[tuple[str, str], int] = {}
        self._evicted_at: dict[tuple[str, str], float] = {}
        self._probed: set[tuple[str, str]] = set()
        """The URLs this replica has probed at least once: a listed URL not among them is not known healthy."""
        self.rounds = 0
        """Rounds completed."""
        self._round_done = asyncio.Event()
        self.probe_changes = Tally("the encoder probes' changes")
        """Rounds that changed what :meth:`state_of` says: a reader that saw this many has nothing new."""

    async def run(self, interval: float) -> None:
        """Probe every ``interval`` seconds until cancelled; a round that fails is logged, not fatal."""
        await every(interval, self.round, self._registry, "encoder health")

    async def round(self) -> None:
        """Probe every listed and evicted URL of every namespace once (all at once), and apply the findings."""
        names = await self._registry.namespaces()
        before = (dict(self._failures), dict(self._evicted_at), frozenset(self._probed))
        seen = await asyncio.gather(*[self._namespace_round(namespace) for namespace in names])
        self._forget_unseen(set().union(*seen))
        self.rounds += 1
        if (self._failures, self._evicted_at, frozenset(self._probed)) != before:
            self.probe_changes.step()
        # Replaced, never cleared: every waiter of this round sees it set.
        self._round_done.set()
        self._round_done = asyncio.Event()

    async def _namespace_round(self, namespace: str) -> set[tuple[str, str]]:
        """One namespace's probes and their consequences; the (namespace, URL) pairs probed."""
        listed_record, evicted_record = await self._registry.get_many(
            [encoder_list_key(namespace), evicted_key(namespace)]
        )
        listed = members_of(None if listed_record is None else listed_record.value)
        evicted = members_of(None if evicted_record is None else evicted_record.value)
        urls = list(dict.fromkeys([*listed, *evicted]))
        healthy = await asyncio.gather(*[self._probe(url) for url in urls])
        for url, ok in zip(urls, healthy, strict=True):
            if url in listed:
                # Also evicted: another replica is between the two writes of an eviction or a
                # revival (or one died there). Probed as listed; the evicted set is left alone.
                await self._listed(namespace, url, ok)
            else:
                await self._evicted(namespace, url, ok)
        probed = {(namespace, url) for url in urls}
        self._probed |= probed
        return probed

    def probed(self, namespace: str, url: str) -> bool:
        """Whether this replica has probed ``url`` yet (a URL listed since its last round has not)."""
        return (namespace, url) in self._probed

    def state_of(self, namespace: str, url: str) -> tuple[int, float | None]:
        """What this replica's probes found of ``url``: its consecutive failures, and the seconds since it
        was evicted (``None`` when this replica has not seen it evicted: listed, or until its next round)."""
        at = (namespace, url)
        since = self._evicted_at.get(at)
        return self._failures.get(at, 0), None if since is None else time.monotonic() - since

    async def after_rounds(self, count: int = 1) -> None:
        """Return once ``count`` more rounds are complete (tests await this instead of sleeping)."""
        target = self.rounds + count
        while self.rounds < target:
            await self._round_done.wait()

    async def _probe(self, url: str) -> bool:
        async with self._probes:
            try:
                async with self._session.get(f"{url}/health", timeout=self._timeout) as reply:
                    return reply.status == 200
            except (aiohttp.ClientError, TimeoutError, ValueError):
                # Refused, reset, timed out, or not a URL at all: a failure.
                return False

    async def _listed(self, namespace: str, url: str, ok: bool) -> None:
        at = (namespace, url)
        if ok:
            self._failures.pop(at, None)
            return
        failures = self._failures[at] = self._failures.get(at, 0) + 1
        if failures < FAILURES_TO_EVICT:
            return
        del self._failures[at]
        key = encoder_list_key(namespace)
        if not _has(await self._registry.get(key), url):
            return  # unregistered, or evicted by another replica, meanwhile
        await self._registry.set_member(evicted_key(namespace), url, present=True)
        await self._registry.set_member(key, url, present=False)
        self._evicted_at[at] = time.monotonic()
        log.warning(
            "evicted encoder URL %s after %d failed health checks",
            printable(url),
            failures,
            extra={"namespace": namespace},
        )

    async def _evicted(self, namespace: str, url: str, ok: bool) -> None:
        at = (namespace, url)
        since = self._evicted_at.setdefault(at, time.monotonic())
        key = evicted_key(namespace)
        if ok:
            if not _has(await self._registry.get(key), url):
                return  # unregistered meanwhile: it stays out
            await self._registry.set_member(encoder_list_key(namespace), url, present=True)
            await self._registry.set_member(key, url, present=False)
            del self._evicted_at[at]
            log.info(
                "encoder URL %s is healthy again: listed", printable(url), extra={"namespace": namespace}
            )
        elif self._evicted_ttl and time.monotonic() - since >= self._evicted_ttl:
            await self._registry.set_member(key, url, present=False)
            del self._evicted_at[at]
            log.info(
                "forgot encoder URL %s, unhealthy for %gs",
                printable(url),
                self._evicted_ttl,
                extra={"namespace": namespace},
            )

    def _forget_unseen(self, seen: set[tuple[str, str]]) -> None:
        """Counts and clocks of URLs no longer listed nor evicted: an unregister ends them."""
        for table in (self._failures, self._evicted_at):
            for at in [at for at in table if at not in seen]:
                del table[at]
        self._probed &= seen


ENCODER_HEALTH = web.AppKey("encoder_health", EncoderHealth)
"""The app's prober, when probing is on."""


async def encoder_health_context(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx``: one probing task per app, when ``encoder_health_interval`` is not 0; its
    probe changes under ``appkeys.PROBE_CHANGES``."""
    config = app[CONFIG].settings_of(EncoderSettings)
    if not config.encoder_health_interval:
        yield
        return
    async with aiohttp.ClientSession() as session:
        health = EncoderHealth(
            app[REGISTRY],
            session,
            timeout=config.encoder_health_timeout,
            evicted_ttl=config.encoder_evicted_ttl,
        )
        app[ENCODER_HEALTH] = health
        app[PROBE_CHANGES] = health.probe_changes  # the page's watch counts, and the fast path, read it
        async with running(health.run(config.encoder_health_interval), "aiobootstrap encoder health"):
            yield
