"""The blocking client, for engines whose ranks run plain threads.

It is :class:`BootstrapClient` on a private event loop in a daemon thread (see
``_loopthread``): the same wire code, the same retries, the same errors; each
method submits the async call and blocks until it answers. Threads may share
one client: their calls run side by side on its loop, over one session.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from ._client import Backoff, BootstrapClient
from ._loopthread import LoopThread, LoopThreadOwner
from ._protocol import DEFAULT_NAMESPACE, RankListing, TransferEngineInfo

__all__ = ["SyncBootstrapClient"]

T = TypeVar("T")


class SyncBootstrapClient(LoopThreadOwner):
    """A blocking client for an aiobootstrap (or compatible) server.

    ::

        with SyncBootstrapClient("http://10.0.0.1:6789") as client:
            client.register(3, session_id="10.0.0.7:18000", weights_info_dict={})
            info = client.get(3, timeout=60.0)

    Methods, arguments and errors are :class:`BootstrapClient`'s. Calling a
    method from a thread that runs an event loop raises ``RuntimeError``: it
    would stall that loop for as long as the call waits; use
    :class:`BootstrapClient` there. Close the client (or use ``with``) to stop
    its thread and release its connections; calls still waiting in other
    threads then raise ``RuntimeError``.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        ssl: ssl.SSLContext | bool = True,
        backoff: Backoff | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        reregister: bool = False,
    ) -> None:
        self._client = BootstrapClient(
            url, token=token, ssl=ssl, backoff=backoff, namespace=namespace, reregister=reregister
        )
        self._loop_thread = LoopThread(f"aiobootstrap client {self._client.url}")

    @property
    def url(self) -> str:
        return self._client.url

    @property
    def namespace(self) -> str:
        return self._client.namespace

    def close(self) -> None:
        """Stop waiting calls, close the connections, stop the thread; idempotent."""
        self._loop_thread.close(self._client.close)

    # -- the API, as BootstrapClient's -----------------------------------

    def health(self) -> bool:
        """Whether the server answers ``/health`` right now."""
        return self._run(self._client.health())

    def register(
        self,
        rank: int,
        *,
        session_id: str,
        weights_info_dict: Mapping[str, Any],
        timeout: float | None = 60.0,
    ) -> None:
        """Publish ``rank``'s info; see :meth:`BootstrapClient.register`."""
        self._run(
            self._client.register(
                rank, session_id=session_id, weights_info_dict=weights_info_dict, timeout=timeout
            )
        )

    def unregister(self, rank: int, *, timeout: float | None = 60.0) -> bool:
        """Remove ``rank``'s info; whether there was any. See :meth:`BootstrapClient.unregister`."""
        return self._run(self._client.unregister(rank, timeout=timeout))

    def get(self, rank: int, *, timeout: float | None = None, after: int = 0) -> TransferEngineInfo:
        """``rank``'s info, waiting up to ``timeout`` seconds; see :meth:`BootstrapClient.get`."""
        return self._run(self._client.get(rank, timeout=timeout, after=after))

    def get_many(
        self, ranks: Iterable[int], *, timeout: float | None = None, after: int = 0
    ) -> dict[int, TransferEngineInfo]:
        """Every rank's info in one wait; see :meth:`BootstrapClient.get_many`."""
        # Read the iterable here: a generator belongs to the caller's thread.
        wanted = list(ranks)
        return self._run(self._client.get_many(wanted, timeout=timeout, after=after))

    def list_ranks(self) -> RankListing:
        """Who has registered; see :meth:`BootstrapClient.list_ranks`."""
        return self._run(self._client.list_ranks())

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._loop_thread.run(coro)
        coro.close()
        raise RuntimeError(
            "SyncBootstrapClient blocks its caller and would stall this thread's running event loop; "
            "use BootstrapClient (await client.get(...)) here instead."
        )
