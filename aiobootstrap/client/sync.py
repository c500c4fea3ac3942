"""The blocking client, for engines whose ranks run plain threads.

It is :class:`BootstrapClient` on a private event loop in a daemon thread (see
``_loopthread``): the same wire code, the same retries, the same errors; each
method submits the async call and blocks until it answers. Threads may share
one client: their calls run side by side on its loop, over one session.

The methods are not written twice: each is made from :class:`BootstrapClient`'s
by :func:`_blocking`, which keeps its signature (for type checkers, through
``ParamSpec``; for ``help()`` and ``inspect``, through ``functools.wraps``) and
its docstring. A method added to the async client and not listed here fails
a test, as does a constructor argument that differs. The one method written
out is ``watch_encoder_urls``: an async iterator is not a coroutine, so it is
the blocking ``wait_encoder_urls`` in a loop (a test keeps its parameters
the async one's); and ``lease``, a plain context manager around the async one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
import weakref
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from .._loopthread import LoopThread, LoopThreadOwner
from .._names import DEFAULT_NAMESPACE
from ..wire.results import EncoderUrls
from ..wire.routes import DEFAULT_MAX_BODY_SIZE
from ..wire.watch import WatchedChange
from .client import BootstrapClient
from .leases import ClientLease
from .retry import Backoff

__all__ = ["SyncBootstrapClient"]

P = ParamSpec("P")
T = TypeVar("T")


def _blocking(
    method: Callable[Concatenate[BootstrapClient, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[SyncBootstrapClient, P], T]:
    """``method`` of the async client as a blocking method of the sync one."""

    @functools.wraps(method)
    def blocking(self: SyncBootstrapClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        # The coroutine is made here but runs on the loop thread, while this thread waits.
        return self._run(method(self._client, *args, **kwargs))

    return blocking


class SyncBootstrapClient(LoopThreadOwner):
    """A blocking client for an aiobootstrap (or compatible) server.

    ::

        with SyncBootstrapClient("http://10.0.0.1:6789") as client:
            client.register(3, session_id="10.0.0.7:18000", weights_info_dict={})
            info = client.get(3, timeout=60.0)

    Arguments, methods and errors are :class:`BootstrapClient`'s (but for
    ``session=`` and ``connector=``, which belong to an event loop, and this
    client's loop is its own, in its thread). Calling
    a method from a thread that runs an event loop raises ``RuntimeError``:
    it would stall that loop for as long as the call waits; use
    :class:`BootstrapClient` there. Close the client (or use ``with``) to stop
    its thread and release its connections; calls still waiting in other
    threads then raise ``RuntimeError``.
    """

    # Written out, unlike the methods: type checkers ignore an __init__ made by
    # a function, and a constructor they cannot check is worse than one
    # signature to keep in step (a test compares it with BootstrapClient's).
    def __init__(
        self,
        url: str | Sequence[str],
        *,
        token: str | None = None,
        ssl: ssl.SSLContext | bool = True,
        backoff: Backoff | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        reregister: bool = False,
        max_reply_size: int | None = DEFAULT_MAX_BODY_SIZE,
    ) -> None:
        self._client = BootstrapClient(
            url,
            token=token,
            ssl=ssl,
            backoff=backoff,
            namespace=namespace,
            reregister=reregister,
            max_reply_size=max_reply_size,
        )
        self._loop_thread = LoopThread(f"aiobootstrap client {self._client.url}")
        # A one-shot ``SyncBootstrapClient(url).register(...)`` is never closed: closed when collected, or at
        # exit, so that aiohttp has no unclosed session to warn of. The finalizer holds no reference to self.
        self._closer = weakref.finalize(self, _close, self._loop_thread, self._client)

    @property
    def url(self) -> str:
        """The base URL calls go to now."""
        return self._client.url

    @property
    def urls(self) -> tuple[str, ...]:
        """Every base URL the client was given, in order."""
        return self._client.urls

    @property
    def namespace(self) -> str:
        return self._client.namespace

    def close(self) -> None:
        """Stop waiting calls, close the connections, stop the thread; idempotent."""
        self._closer()

    # -- the API: BootstrapClient's, blocking -----------------------------

    health = _blocking(BootstrapClient.health)
    register = _blocking(BootstrapClient.register)
    unregister = _blocking(BootstrapClient.unregister)
    get = _blocking(BootstrapClient.get)
    get_many = _blocking(BootstrapClient.get_many)
    register_parallelism_config = _blocking(BootstrapClient.register_parallelism_config)
    unregister_parallelism_config = _blocking(BootstrapClient.unregister_parallelism_config)
    get_parallelism_config = _blocking(BootstrapClient.get_parallelism_config)
    get_parallelism_configs = _blocking(BootstrapClient.get_parallelism_configs)
    register_encoder_url = _blocking(BootstrapClient.register_encoder_url)
    unregister_encoder_url = _blocking(BootstrapClient.unregister_encoder_url)
    list_encoder_urls = _blocking(BootstrapClient.list_encoder_urls)
    encoder_url_health = _blocking(BootstrapClient.encoder_url_health)
    wait_encoder_urls = _blocking(BootstrapClient.wait_encoder_urls)
    register_prefill_rank = _blocking(BootstrapClient.register_prefill_rank)
    prefill_parallel_info = _blocking(BootstrapClient.prefill_parallel_info)
    prefill_rank_address = _blocking(BootstrapClient.prefill_rank_address)
    register_dp_rank = _blocking(BootstrapClient.register_dp_rank)
    query_dp_ranks = _blocking(BootstrapClient.query_dp_ranks)
    prefill_status = _blocking(BootstrapClient.prefill_status)
    get_metadata = _blocking(BootstrapClient.get_metadata)
    wait_metadata = _blocking(BootstrapClient.wait_metadata)
    put_metadata = _blocking(BootstrapClient.put_metadata)
    delete_metadata = _blocking(BootstrapClient.delete_metadata)
    mooncake_engines = _blocking(BootstrapClient.mooncake_engines)
    register_vllm_worker = _blocking(BootstrapClient.register_vllm_worker)
    query_vllm_workers = _blocking(BootstrapClient.query_vllm_workers)
    wait_vllm_workers = _blocking(BootstrapClient.wait_vllm_workers)
    vllm_status = _blocking(BootstrapClient.vllm_status)
    list_ranks = _blocking(BootstrapClient.list_ranks)
    list_namespaces = _blocking(BootstrapClient.list_namespaces)

    @contextlib.contextmanager
    def lease(self, ttl: float = 10.0, *, timeout: float | None = 60.0) -> Iterator[ClientLease]:
        """:meth:`BootstrapClient.lease` as a plain context manager: ``with client.lease(ttl=10) as lease:``.

        The lease is kept alive on the client's loop thread, and revoked when the block ends.
        """
        lease = self._client.lease(ttl, timeout=timeout)
        self._run(lease.__aenter__())
        try:
            yield lease
        finally:
            self._run(lease.revoke())

    def watch_encoder_urls(self, *, after: int = 0) -> Iterator[EncoderUrls]:
        """Each new encoder URL list, for ever: ``for urls in client.watch_encoder_urls(): ...``.

        :meth:`BootstrapClient.watch_encoder_urls`, blocking: an async
        iterator cannot be made blocking by ``_blocking``, so this one is
        :meth:`wait_encoder_urls` in a loop, as the async one is.
        """
        while True:
            current = self.wait_encoder_urls(after)
            after = current.version
            yield current

    def watch(
        self,
        after: int = 0,
        *,
        kind: str | None = None,
        role: str | None = None,
        ranks: Iterable[int] | None = None,
    ) -> Iterator[WatchedChange]:
        """:meth:`BootstrapClient.watch`, blocking: ``for change in client.watch(): ...``.

        Each step runs the async iterator's next step on the client's loop;
        closing the generator (or leaving the ``for``) closes it there.
        """
        changes = self._client.watch(after, kind=kind, role=role, ranks=ranks)

        async def step() -> WatchedChange:
            return await anext(changes)

        try:
            while True:
                try:
                    change = self._run(step())
                except StopAsyncIteration:
                    return
                yield change
        finally:
            aclose = getattr(changes, "aclose", None)
            if aclose is not None and not self._loop_thread.closed:

                async def close() -> None:
                    await aclose()

                self._run(close())

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


def _close(loop_thread: LoopThread, client: BootstrapClient) -> None:
    """Close ``client`` and stop its thread; a client collected on its own loop (nothing there holds one) is
    left to the thread's exit, as that loop cannot wait for itself."""
    if not loop_thread.in_loop_thread():
        loop_thread.close(client.close)
