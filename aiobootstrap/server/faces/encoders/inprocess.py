"""The engines' in-process encoder registry: a thread-hosted server that keeps a caller's list current.

The engines construct ``EncoderBootstrapServer(host=..., port=..., urls=shared_list)``
and read ``shared_list`` by reference in the same process. This server is the
whole aiobootstrap server (every route, every store) in a daemon thread, as
:class:`ThreadedBootstrapServer` is; the list it is given is rewritten in
place, under a lock, whenever the default namespace's encoder list changes:
a registration over HTTP, one in-process, an eviction or a revival by the
health probes (see ``encoder_health``), or another replica's, through the store.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from ...._names import DEFAULT_NAMESPACE
from ....core.registry import Registry
from ....exceptions import BadRequest, BootstrapError, ShuttingDown
from ....store import Key, Record
from ....wire import encoder_url
from ...config import DEFAULT_HOST, DEFAULT_PORT, engine_settings
from ...threaded import ThreadedBootstrapServer
from ..kinds import encoder_list_key, encoder_urls
from .health import add_url, remove_url

__all__ = ["EncoderBootstrapServer"]

_FOLLOW_WAIT = 3600.0
"""Seconds one wait of the list follower lasts before it asks again (any value works)."""
_RETRY = 0.1
"""Seconds before the follower asks again when its wait was refused."""


class EncoderBootstrapServer(ThreadedBootstrapServer):
    """A drop-in for the engines' ``EncoderBootstrapServer``: encoder URLs, probed, in a daemon thread.

    ::

        urls: list[str] = []
        server = EncoderBootstrapServer("0.0.0.0", 8998, urls=urls)
        server.register("http://10.0.0.9:8000/")   # True: urls == ["http://10.0.0.9:8000"]
        server.unregister("http://10.0.0.9:8000")  # True: urls == []
        server.close()

    ``urls`` is the caller's list, kept current in place; the URLs it holds
    when given are registered. ``health_check_interval``,
    ``health_check_timeout`` and ``evicted_ttl`` are the encoder probes'
    settings; ``None`` reads the engines' variable, as their class does
    (``SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_INTERVAL``, ``..._TIMEOUT``,
    ``..._EVICTED_TTL``), else :class:`ServerConfig`'s defaults (10 s, 2 s,
    600 s). Other keyword arguments are :class:`ServerConfig` fields.
    """

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        urls: list[str] | None = None,
        health_check_interval: float | None = None,
        health_check_timeout: float | None = None,
        evicted_ttl: float | None = None,
        **options: Any,
    ) -> None:
        # As the engines' class does: its variables are the defaults, arguments win (and options
        # passed as ServerConfig fields too). The one reader of the environment outside the CLI.
        given = {
            "encoder_health_interval": health_check_interval,
            "encoder_health_timeout": health_check_timeout,
            "encoder_evicted_ttl": evicted_ttl,
        }
        for name, value in {**engine_settings(os.environ), **options}.items():
            options[name] = value
        for name, value in given.items():
            if value is not None:
                options[name] = value
        self.urls: list[str] = urls if urls is not None else []
        """The URLs listed now, in order of first registration: the caller's own list, rewritten in place."""
        self._lock = threading.Lock()
        self._version = -1
        self._list_key = encoder_list_key(DEFAULT_NAMESPACE)
        initial = [_kept(url) for url in self.urls]
        super().__init__(host, port, **options)
        try:
            self._loop_thread.run(self._start(initial))
        except BaseException:
            self.close()
            raise

    async def _start(self, initial: list[str]) -> None:
        for url in initial:
            await add_url(self._registry, DEFAULT_NAMESPACE, url)
        self._apply(await self._registry.get(encoder_list_key(DEFAULT_NAMESPACE)))
        # Told in the step that applies a change, before the request that made it is answered, so a
        # reader in this process sees the list changed once the 200 is out (the follower's wait woke
        # a loop turn or more later); the follower's parked wait is what has the change delivered.
        self._registry.deliveries.subscribe(self)
        self._follower = asyncio.create_task(self._follow(), name="aiobootstrap encoder list follower")

    async def _follow(self) -> None:
        """Rewrite the caller's list at every change of the encoder list, whoever made it."""
        key = encoder_list_key(DEFAULT_NAMESPACE)
        while True:
            try:
                self._apply(await self._registry.wait(key, _FOLLOW_WAIT, after=max(self._version, 0)))
            except ShuttingDown:
                return  # the server is stopping: the list keeps its last state
            except BootstrapError:
                # Every wait slot taken (--max-waiters), or the store unreachable: read again shortly.
                await asyncio.sleep(_RETRY)

    def delivered(self, key: Key, record: Record | None) -> None:
        """A record about to wake ``key``'s waiters (the registry's deliveries): the encoder list's is applied."""
        if record is not None and key == self._list_key:
            self._apply(record)

    def _apply(self, record: Record | None) -> None:
        """The list as of ``record``, unless a newer one was applied already (runs on the server's loop)."""
        version = 0 if record is None else record.version
        if version <= self._version:
            return
        with self._lock:
            self._version = version
            self.urls[:] = encoder_urls(record)

    def register(self, url: str) -> bool:
        """List ``url`` (less a trailing ``/``); ``True`` when it was not listed. An evicted URL returns at once."""
        return self._loop_thread.run(self._change(add_url, _kept(url)))

    def unregister(self, url: str) -> bool:
        """Unlist ``url`` and end its probing; ``True`` when it was listed or evicted."""
        return self._loop_thread.run(self._change(remove_url, _kept(url)))

    async def _change(self, change: Callable[[Registry, str, str], Awaitable[bool]], url: str) -> bool:
        changed = await change(self._registry, DEFAULT_NAMESPACE, url)
        # Applied before returning: the caller reads its list right after.
        self._apply(await self._registry.get(encoder_list_key(DEFAULT_NAMESPACE)))
        return changed

    def list_urls(self) -> list[str]:
        """The URLs listed now (a copy of :attr:`urls`)."""
        with self._lock:
            return list(self.urls)

    @property
    def parked(self) -> int:
        """How many get requests are waiting right now (the list follower's own wait not counted)."""
        follower = getattr(self, "_follower", None)
        if follower is None or self._loop_thread.closed:
            return super().parked
        return self._loop_thread.run(self._parked_but(follower))

    async def _parked_but(self, follower: asyncio.Task[None]) -> int:
        return self._registry.parked - (follower in self._registry.parked_tasks)


def _kept(url: str) -> str:
    """An encoder URL as it is kept (less a trailing ``/``); ``ValueError`` for an empty one."""
    try:
        kept = encoder_url(url)
    except BadRequest as refused:
        raise ValueError(refused.detail) from None
    if kept is None:
        raise ValueError(f"an encoder URL must be a non-empty string, not {url!r}")
    return kept
