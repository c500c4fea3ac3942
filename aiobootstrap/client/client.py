"""The async client: register a rank's info, and wait for others'.

Theory of operation
-------------------
:class:`BootstrapClient` is the public API, one class: its constructor and
lifecycle, its lease and its watch, and every call of every face. A face's
calls are written in the client's module of that face, each a function of the
transport (``engine_info``, ``encoders``, ``prefill``, ``metadata``,
``vllm``, ``native``): it builds the request, asks the transport, and decodes the reply.
The class lists them, and :func:`_method` makes each one of its methods with
the function's name, signature and docstring, as ``sync`` makes each of those
a blocking method of :class:`SyncBootstrapClient`. So a method is written once,
found by its name in its face's module, and the class is the API's one table.

Sending a request is the transport's (``transport``): failover across
replicas, backoff until the deadline, the long-poll that outlasts the
server's ``--max-wait``, and the boot-id probing that re-registers on a
restarted server. The per-rank kinds share one path (``calls``). The wire
(paths, bodies, which ``404`` means "not registered", an error's class) is
read and written by ``aiobootstrap.wire`` alone, which the server shares.
"""

from __future__ import annotations

import functools
import inspect
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import aiohttp

from .._names import DEFAULT_NAMESPACE
from ..wire.results import EncoderUrls
from ..wire.routes import DEFAULT_MAX_BODY_SIZE
from ..wire.watch import WatchedChange
from . import encoders, engine_info, metadata, native, prefill, vllm
from . import watch as _watch
from .leases import ClientLease
from .retry import Backoff
from .transport import Transport

__all__ = ["BootstrapClient"]

P = ParamSpec("P")
T = TypeVar("T")


def _method(
    call: Callable[Concatenate[Transport, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[BootstrapClient, P], Coroutine[Any, Any, T]]:
    """A face's ``call`` (a function of the transport) as a method of :class:`BootstrapClient`: its name,
    docstring and signature (``self`` in the transport's place), calling it with the client's transport."""

    @functools.wraps(call)
    async def method(self: BootstrapClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await call(self._transport, *args, **kwargs)

    signature = inspect.signature(call)
    transport, *parameters = signature.parameters.values()
    client = transport.replace(name="self", annotation=inspect.Parameter.empty)
    method.__signature__ = signature.replace(parameters=[client, *parameters])  # type: ignore[attr-defined]
    method.__qualname__ = f"BootstrapClient.{call.__name__}"
    return method


class BootstrapClient:
    """An async client for an aiobootstrap (or compatible) server.

    ::

        async with BootstrapClient("http://10.0.0.1:6789") as client:
            await client.register(3, session_id="10.0.0.7:18000", weights_info_dict={})
            info = await client.get(3, timeout=60.0)

    ``url`` is a base URL, or a list of the base URLs of one registry's
    replicas: a connection failure moves to the next (see ``docs/client.md``).
    One ``aiohttp.ClientSession`` serves every call, with no cap on
    connections (each parked get holds one); close the client (or use ``async
    with``) to release it. ``session=`` uses the caller's session instead,
    ``connector=`` the caller's connector; the client never closes either.
    ``namespace=`` addresses one deployment on a server that hosts several.
    ``max_reply_size=`` bounds the bytes of any reply, per rank it holds (the
    server's default body limit; ``None`` for no bound): a larger reply is an
    :class:`UnexpectedReply`, read no further. A call ends by its ``timeout``,
    plus one round trip (:data:`~aiobootstrap.client.retry.ROUND_TRIP`) at
    most, whatever the server does.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        token: str | None = None,
        ssl: ssl.SSLContext | bool = True,
        backoff: Backoff | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        reregister: bool = False,
        session: aiohttp.ClientSession | None = None,
        connector: aiohttp.BaseConnector | None = None,
        max_reply_size: int | None = DEFAULT_MAX_BODY_SIZE,
    ) -> None:
        self._transport = Transport(
            url,
            token=token,
            ssl=ssl,
            backoff=backoff,
            namespace=namespace,
            reregister=reregister,
            session=session,
            connector=connector,
            max_reply_size=max_reply_size,
        )

    @property
    def url(self) -> str:
        """The base URL calls go to now (the first of ``urls`` until one fails)."""
        return self._transport.url

    @property
    def urls(self) -> tuple[str, ...]:
        """Every base URL the client was given, in order."""
        return self._transport.urls

    @property
    def namespace(self) -> str:
        """The deployment the client addresses on its server."""
        return self._transport.namespace

    async def __aenter__(self) -> BootstrapClient:
        self._transport.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the session the client made; a session or connector it was given stays open."""
        await self._transport.close()

    # -- the API: each face's calls, written in its module -------------------

    # aiobootstrap's own routes (native.py), its leases (leases.py) and its watch (watch.py)
    health = _method(native.health)
    list_ranks = _method(native.list_ranks)
    list_namespaces = _method(native.list_namespaces)

    def lease(self, ttl: float = 10.0, *, timeout: float | None = 60.0) -> ClientLease:
        """A lease of ``ttl`` seconds: ``async with client.lease(ttl=10.0) as lease:``.

        Entering grants it (retrying an unreachable server up to ``timeout``)
        and keeps it alive in the background every third of its TTL; leaving
        revokes it, deleting every record registered with ``lease=lease``. A
        lease found gone is granted again and its records registered again,
        with one WARNING (see ``docs/client.md``).
        """
        return ClientLease(self._transport, ttl, timeout=timeout)

    def watch(
        self,
        after: int = 0,
        *,
        kind: str | None = None,
        role: str | None = None,
        ranks: Iterable[int] | None = None,
    ) -> AsyncIterator[WatchedChange]:
        """Every change of the namespace after version ``after``, oldest first, for ever.

        ``async for change in client.watch(): ...`` yields a
        :class:`~aiobootstrap.WatchedChange` per registration, unregister or
        encoder URL added or removed (``kind``, ``role``, ``ranks`` narrow
        them), resuming by itself across reconnects and replicas. When the
        server's history no longer reaches back (a ``410``) or the registry
        restarted without its data, it re-reads the listing and yields the
        difference from what it had yielded (see ``docs/client.md``).
        """
        return _watch.watch(self._transport, after, kind, role, ranks)

    # SGLang's transfer-engine info and parallelism config (engine_info.py)
    register = _method(engine_info.register)
    unregister = _method(engine_info.unregister)
    get = _method(engine_info.get)
    get_many = _method(engine_info.get_many)
    register_parallelism_config = _method(engine_info.register_parallelism_config)
    unregister_parallelism_config = _method(engine_info.unregister_parallelism_config)
    get_parallelism_config = _method(engine_info.get_parallelism_config)
    get_parallelism_configs = _method(engine_info.get_parallelism_configs)

    # SGLang's encoder URL list (encoders.py)
    register_encoder_url = _method(encoders.register_encoder_url)
    unregister_encoder_url = _method(encoders.unregister_encoder_url)
    list_encoder_urls = _method(encoders.list_encoder_urls)
    encoder_url_health = _method(encoders.encoder_url_health)
    wait_encoder_urls = _method(encoders.wait_encoder_urls)

    async def watch_encoder_urls(self, *, after: int = 0) -> AsyncIterator[EncoderUrls]:
        """Each new encoder URL list, for ever: ``async for urls in client.watch_encoder_urls(): ...``.

        Yields the list whenever its version passes the last one yielded
        (``after`` at first). Changes made while the caller is busy arrive
        as one: it sees the newest list, not every step to it.
        """
        while True:
            current = await self.wait_encoder_urls(after)
            after = current.version
            yield current

    # SGLang's prefill bootstrap for PD disaggregation (prefill.py)
    register_prefill_rank = _method(prefill.register_prefill_rank)
    prefill_parallel_info = _method(prefill.prefill_parallel_info)
    prefill_rank_address = _method(prefill.prefill_rank_address)
    register_dp_rank = _method(prefill.register_dp_rank)
    query_dp_ranks = _method(prefill.query_dp_ranks)
    prefill_status = _method(prefill.prefill_status)

    # Mooncake's metadata (metadata.py)
    get_metadata = _method(metadata.get_metadata)
    wait_metadata = _method(metadata.wait_metadata)
    put_metadata = _method(metadata.put_metadata)
    delete_metadata = _method(metadata.delete_metadata)
    mooncake_engines = _method(metadata.mooncake_engines)

    # vLLM's Mooncake connector bootstrap (vllm.py)
    register_vllm_worker = _method(vllm.register_vllm_worker)
    query_vllm_workers = _method(vllm.query_vllm_workers)
    wait_vllm_workers = _method(vllm.wait_vllm_workers)
    vllm_status = _method(vllm.vllm_status)
