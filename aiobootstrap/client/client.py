"""The async client: register a rank's info, and wait for others'.

Theory of operation
-------------------
:class:`BootstrapClient` is the public API: each method says what it asks
for, builds the request, and decodes the reply. Sending it is the transport's
(``transport``): failover across replicas, backoff until the deadline, the
long-poll that outlasts the server's ``--max-wait``, and the boot-id probing
that re-registers on a restarted server.

Every per-rank kind (transfer-engine info, parallelism config) goes through
one path in ``calls`` (register, unregister, get one, get a batch), given the
kind's entry in the wire's kind table (``wire.kinds``) for its routes and the
noun of its ``404``. A role is a query parameter or a body field, left out for
the default ``target`` so that such requests are the classic ones.

The wire (paths, bodies, which ``404`` means "not registered") is read and
written by ``aiobootstrap.wire`` alone, which the server shares.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any

import aiohttp

from .. import wire
from .._names import DEFAULT_NAMESPACE, DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from ..exceptions import ServerUnavailable
from ..wire import (
    DEFAULT_MAX_BODY_SIZE,
    EncoderHealthReport,
    EncoderUrls,
    NamespaceSummary,
    ParallelismConfig,
    RankListing,
    TransferEngineInfo,
    WatchedChange,
)
from ..wire.kinds import PARALLELISM_CONFIG_ROUTES, TRANSFER_ENGINE_INFO_ROUTES
from . import calls
from . import watch as _watch
from .leases import ClientLease, send_registration
from .metadata import MetadataCalls
from .prefill import PrefillCalls
from .restarts import Replay
from .retry import Backoff, Deadline
from .transport import Transport

__all__ = ["BootstrapClient"]

_ENGINE_INFO = TRANSFER_ENGINE_INFO_ROUTES
_CONFIG = PARALLELISM_CONFIG_ROUTES
"""The per-rank kinds, from the wire's kind table: their routes and the noun of their 404s."""
_HEALTH_TIME = 10.0
_LISTING_TIME = 60.0
"""The whole time of the calls that ask each replica once and take no ``timeout``."""


class BootstrapClient(PrefillCalls, MetadataCalls):
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

    # -- the API -------------------------------------------------------

    def lease(self, ttl: float = 10.0, *, timeout: float | None = 60.0) -> ClientLease:
        """A lease of ``ttl`` seconds: ``async with client.lease(ttl=10.0) as lease:``.

        Entering grants it (retrying an unreachable server up to ``timeout``)
        and keeps it alive in the background every third of its TTL; leaving
        revokes it, deleting every record registered with ``lease=lease``. A
        lease found gone is granted again and its records registered again,
        with one WARNING (see ``docs/client.md``).
        """
        return ClientLease(self._transport, ttl, timeout=timeout)

    async def health(self) -> bool:
        """Whether the server (any replica, tried once each) answers ``/health`` right now."""
        try:
            reply = await self._transport.call(
                "GET", wire.HEALTH_PATH, Deadline(0, overrun=_HEALTH_TIME), read_timeout=_HEALTH_TIME
            )
        except ServerUnavailable:
            return False
        return reply.status == 200

    async def register(
        self,
        rank: int,
        *,
        session_id: str | None = None,
        weights_info_dict: Mapping[str, Any],
        fields: Mapping[str, Any] | None = None,
        role: str = DEFAULT_ROLE,
        timeout: float | None = 60.0,
        lease: ClientLease | None = None,
    ) -> None:
        """Publish ``rank``'s transfer-engine info, replacing any earlier registration of it.

        ``fields`` are more fields of the info, sent as given: a backend-tagged
        registration (``{"backend": "nixl", "agent_name": ..., "agent_metadata":
        ...}``, with no ``session_id``) or anything else the readers want; a
        getter finds them all in :attr:`TransferEngineInfo.fields`. ``role``
        keeps a draft model's records apart from its target's.

        While the server is not up, retries with backoff for up to ``timeout``
        seconds (``None``: for ever), then raises :class:`ServerUnavailable`.
        ``lease`` (from :meth:`lease`) puts the record on it: it lives while the lease does.
        """
        body = wire.engine_info_body(rank, session_id, weights_info_dict, fields, role)
        await calls.register(self._transport, _ENGINE_INFO, rank, role, body, timeout, lease)

    async def unregister(self, rank: int, *, role: str = DEFAULT_ROLE, timeout: float | None = 60.0) -> bool:
        """Remove ``rank``'s info; waiters for it go on waiting for a new registration.

        Returns ``False`` when the server had no info for ``rank`` (nothing
        to remove), ``True`` when it removed some.
        """
        return await calls.unregister(self._transport, _ENGINE_INFO, rank, role, timeout)

    async def get(
        self,
        rank: int,
        *,
        timeout: float | None = None,
        after: int = 0,
        role: str = DEFAULT_ROLE,
        whole: bool = False,
    ) -> TransferEngineInfo:
        """``rank``'s info, waiting up to ``timeout`` seconds for it to register.

        ``timeout=None`` waits for ever; ``0`` asks once. ``after=V`` waits
        for a registration newer than version ``V``. ``whole=True`` asks for
        the registration whole (``form=object``), so that ``fields`` holds
        every field even of classic info (a tagged backend's info always
        comes whole). Raises :class:`RankNotRegistered` when the server said
        "not registered" until the time ran out, :class:`ServerUnavailable`
        when it did not answer.
        """
        query = partial(wire.record_query, rank, after, role=role, whole=whole)
        reply = await calls.get_record(self._transport, _ENGINE_INFO, rank, query, Deadline(timeout))
        return wire.decode_info(reply.body, rank, role)

    async def get_many(
        self,
        ranks: Iterable[int],
        *,
        timeout: float | None = None,
        after: int = 0,
        role: str = DEFAULT_ROLE,
        whole: bool = False,
    ) -> dict[int, TransferEngineInfo]:
        """Every rank's info, in one batch request per few thousand ranks.

        Waits like :meth:`get`; on timeout raises :class:`RankNotRegistered`
        naming every rank still missing.
        """

        def query(spec: str, wait: float) -> dict[str, str]:
            return wire.records_query(spec, after, wait, role=role, whole=whole)

        replies = await calls.get_records(self._transport, _ENGINE_INFO, ranks, query, Deadline(timeout))
        infos: dict[int, TransferEngineInfo] = {}
        for asked, reply in replies:
            infos.update(wire.decode_batch(reply.body, asked, role))
        return infos

    async def register_parallelism_config(
        self,
        rank: int,
        config: Mapping[str, Any],
        *,
        role: str = DEFAULT_ROLE,
        timeout: float | None = 60.0,
        lease: ClientLease | None = None,
    ) -> None:
        """Publish ``rank``'s parallelism config (any JSON object, kept and served exactly as given).

        Retries an unreachable server like :meth:`register`; ``lease`` puts it on a lease.
        """
        body = wire.config_body(rank, config, role)
        await calls.register(self._transport, _CONFIG, rank, role, body, timeout, lease)

    async def unregister_parallelism_config(
        self, rank: int, *, role: str = DEFAULT_ROLE, timeout: float | None = 60.0
    ) -> bool:
        """Remove ``rank``'s parallelism config; whether there was one."""
        return await calls.unregister(self._transport, _CONFIG, rank, role, timeout)

    async def get_parallelism_config(
        self, rank: int, *, timeout: float | None = None, after: int = 0, role: str = DEFAULT_ROLE
    ) -> ParallelismConfig:
        """``rank``'s parallelism config, waiting up to ``timeout`` seconds for it, as :meth:`get` waits.

        Raises :class:`RankNotRegistered` ("No parallelism config for rank N")
        when the time runs out first.
        """
        query = partial(wire.record_query, rank, after, role=role)
        reply = await calls.get_record(self._transport, _CONFIG, rank, query, Deadline(timeout))
        return wire.decode_config(reply.body, rank, reply.version, role)

    async def get_parallelism_configs(
        self, ranks: Iterable[int], *, timeout: float | None = None, after: int = 0, role: str = DEFAULT_ROLE
    ) -> dict[int, ParallelismConfig]:
        """Every rank's parallelism config, in batch requests, waiting as :meth:`get_many` does."""

        def query(spec: str, wait: float) -> dict[str, str]:
            return wire.records_query(spec, after, wait, role=role)

        replies = await calls.get_records(self._transport, _CONFIG, ranks, query, Deadline(timeout))
        configs: dict[int, ParallelismConfig] = {}
        for asked, reply in replies:
            configs.update(wire.decode_config_batch(reply.body, asked, role))
        return configs

    async def register_encoder_url(
        self, url: str, *, timeout: float | None = 60.0, lease: ClientLease | None = None
    ) -> None:
        """Add ``url`` to the encoder URL list (a URL already listed stays listed once).

        Retries an unreachable server like :meth:`register`; with
        ``reregister=True`` the URL is registered again on a restarted server.
        ``lease`` puts the URL on a lease: it leaves the list when the lease ends.
        """
        body = wire.url_body(url)
        replay = Replay("POST", wire.ENCODER_REGISTER_PATH, body)
        key = (wire.ENCODER_REGISTER_PATH, url)
        await send_registration(self._transport, key, replay, timeout, lease)

    async def unregister_encoder_url(self, url: str, *, timeout: float | None = 60.0) -> None:
        """Remove ``url`` from the encoder URL list; nothing to do when it is not listed."""
        self._transport.forget_registration((wire.ENCODER_REGISTER_PATH, url))
        path, body = wire.ENCODER_UNREGISTER_PATH, wire.url_body(url)
        await calls.request(self._transport, "DELETE", path, Deadline(timeout), body=body)

    async def list_encoder_urls(self, *, timeout: float | None = 60.0) -> list[str]:
        """The encoder URLs, in order of first registration (retrying an unreachable server up to ``timeout``)."""
        query = wire.encoder_list_query(0, 0.0)
        reply = await calls.request(
            self._transport, "GET", wire.ENCODER_LIST_PATH, Deadline(timeout), params=query
        )
        return wire.decode_encoder_urls(reply.body).urls

    async def encoder_url_health(self, *, timeout: float | None = 60.0) -> EncoderHealthReport:
        """What the server's probes found of each encoder URL, listed then evicted (``GET
        /encoder_url_health``; retrying an unreachable server up to ``timeout``). Failure counts and
        eviction clocks are each replica's own: given several, the one that answers says."""
        reply = await calls.request(self._transport, "GET", wire.ENCODER_HEALTH_PATH, Deadline(timeout))
        return wire.decode_encoder_health(reply.body)

    async def wait_encoder_urls(self, after: int = 0, *, timeout: float | None = None) -> EncoderUrls:
        """The encoder URL list once its version is past ``after``, waiting up to ``timeout`` seconds.

        When the time runs out first, the list as it is (its ``version``
        equal to ``after``): an unchanged list is an answer, not an error.
        Pass the ``version`` of one answer as the ``after`` of the next to
        follow every change; ``timeout=0`` reads the list and its version at
        once. A version below ``after`` (a restarted in-memory server begins
        its versions again) is a change too.
        """
        return await calls.encoder_urls(self._transport, after, Deadline(timeout))

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

    async def list_ranks(self, *, kind: str = TRANSFER_ENGINE_INFO, role: str = DEFAULT_ROLE) -> RankListing:
        """Who has registered a record of ``kind`` and ``role`` (without their values), and,
        with a world size, who has not. ``kind`` is ``transfer_engine_info`` or ``parallelism_config``."""
        query = wire.listing_query(kind, role)
        reply = await calls.request(
            self._transport,
            "GET",
            wire.RANKS_PATH,
            Deadline(0, overrun=_LISTING_TIME),
            params=query or None,
        )
        return wire.decode_listing(reply.body)

    async def list_namespaces(self) -> list[NamespaceSummary]:
        """Every namespace of the server holding records or parked waits, in order of name (with
        tokens, the ones this client's token covers), whichever namespace this client addresses."""
        reply = await calls.request(
            self._transport, "GET", wire.NAMESPACES_PATH, Deadline(0, overrun=_LISTING_TIME)
        )
        return wire.decode_namespaces(reply.body)
