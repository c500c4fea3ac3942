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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from ...._names import DEFAULT_NAMESPACE
from ....core.registry import Registry
from ....exceptions import BadRequest, BootstrapError
from ....store import Change, Record
from ....wire.bodies import encoder_url
from ....wire.routes import check_namespace
from ...config import DEFAULT_HOST, DEFAULT_PORT, merge_settings
from ...threaded import ThreadedBootstrapServer
from .health import add_url, remove_url
from .keys import encoder_list_key, encoder_urls
from .settings import EncoderSettings

__all__ = ["EncoderBootstrapServer"]

_RETRY = 0.1
"""Seconds before the list is read again when the store did not answer."""


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
    ``..._EVICTED_TTL``), else :class:`EncoderSettings`' defaults (10 s, 2 s,
    600 s), or those of an ``EncoderSettings`` among ``settings=``. ``namespace``
    is the deployment whose list ``urls`` is (``"default"``; the engine plugin
    gives ``AIOBOOTSTRAP_NAMESPACE``'s). Other keyword arguments are
    :class:`ServerConfig` fields.
    """

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        urls: list[str] | None = None,
        health_check_interval: float | None = None,
        health_check_timeout: float | None = None,
        evicted_ttl: float | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        **options: Any,
    ) -> None:
        # As the engines' class does: its variables are the defaults, arguments win (and EncoderSettings
        # passed among the options' settings replace the variables). The one reader of the environment
        # outside the CLI.
        held = options.get("settings", () if options.get("config") is None else options["config"].settings)
        probes = next((settings for settings in held if isinstance(settings, EncoderSettings)), None)
        if probes is None:
            probes = EncoderSettings.from_environment(os.environ)
        given = {
            "encoder_health_interval": health_check_interval,
            "encoder_health_timeout": health_check_timeout,
            "encoder_evicted_ttl": evicted_ttl,
        }
        probes = replace(probes, **{name: value for name, value in given.items() if value is not None})
        options["settings"] = merge_settings(held, [probes])
        self.urls: list[str] = urls if urls is not None else []
        """The URLs listed now, in order of first registration: the caller's own list, rewritten in place."""
        self._lock = threading.Lock()
        self._version = -1
        self._namespace = check_namespace(namespace)
        """The namespace whose list ``urls`` is (a deployment's own, on a server of several)."""
        self._list_key = encoder_list_key(self._namespace)
        self._list_reader: asyncio.Task[None] | None = None
        self._read_again = False
        initial = [_kept(url) for url in self.urls]
        super().__init__(host, port, **options)
        try:
            self._loop_thread.run(self._start(initial))
        except BaseException:
            self.close()
            raise

    async def _start(self, initial: list[str]) -> None:
        # The core tells every change of the encoder lists as it lands (no wait parked to hear them): in
        # the step that applies it, before the request that made it is answered, so a reader in this
        # process sees the list changed once the 200 is out. Subscribed before the first read: a change
        # landing while the read is on its way is heard, and the older read is then ignored (_apply).
        self._registry.subscribe(self._list_key.namespace, self._list_key.kind, self)
        for url in initial:
            await add_url(self._registry, self._namespace, url)
        self._apply(await self._registry.get(self._list_key))

    # -- the core's subscription to the encoder lists' changes ----------------

    def changed(self, changes: Sequence[Change]) -> None:
        """Changes of the encoder lists: its namespace's applied (read first when told its key only)."""
        for change in changes:
            if change.key != self._list_key:
                continue
            if change.record is not None:
                self._apply(change.record)
            elif change.deleted:
                self._apply(None, change.version)
            else:  # another replica's change, told by its key: read it
                self._read_list_later()

    def resync(self) -> None:
        """The feed may have missed changes: read the list again."""
        self._read_list_later()

    def _read_list_later(self) -> None:
        """Read the list in a task (one at a time; a change told meanwhile reads once more after it)."""
        self._read_again = True
        if self._list_reader is None or self._list_reader.done():
            self._list_reader = asyncio.get_running_loop().create_task(
                self._read_list(), name="aiobootstrap encoder list"
            )

    async def _read_list(self) -> None:
        while self._read_again:
            self._read_again = False
            try:
                self._apply(await self._registry.get(self._list_key))
            except BootstrapError:  # the store unreachable: read again shortly, unless the server stops
                self._read_again = not self._registry.closed
                await asyncio.sleep(_RETRY)

    def _apply(self, record: Record | None, version: int | None = None) -> None:
        """The list as of ``record`` (``None``: none, since ``version``), unless a newer one was applied already
        (runs on the server's loop)."""
        if version is None:
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
        changed = await change(self._registry, self._namespace, url)
        # Applied before returning: the caller reads its list right after.
        self._apply(await self._registry.get(self._list_key))
        return changed

    def list_urls(self) -> list[str]:
        """The URLs listed now (a copy of :attr:`urls`)."""
        with self._lock:
            return list(self.urls)


def _kept(url: str) -> str:
    """An encoder URL as it is kept (less a trailing ``/``); ``ValueError`` for an empty one."""
    try:
        kept = encoder_url(url)
    except BadRequest as refused:
        raise ValueError(refused.detail) from None
    if kept is None:
        raise ValueError(f"an encoder URL must be a non-empty string, not {url!r}")
    return kept
