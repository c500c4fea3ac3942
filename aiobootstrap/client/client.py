"""The async client: register a rank's info, and wait for others'.

Theory of operation
-------------------
:class:`BootstrapClient` is the public API: each method says what it asks
for, builds the request, and decodes the reply. Sending it is the transport's
(``_transport``): failover across replicas, backoff until the deadline, the
long-poll that outlasts the server's ``--max-wait``, and the boot-id probing
that re-registers on a restarted server.

Every per-rank kind (transfer-engine info, parallelism config) goes through
one path, ``_register``/``_unregister``/``_get_record``/``_get_records``,
given the kind's entry in the server's kind table (``_kinds``) for its routes
and the noun of its ``404``; the public methods only build the request and
decode the reply. A role is a query parameter or a body field, left out for
the default ``target`` so that such requests are the classic ones.

The wire (paths, bodies, which ``404`` means "not registered") is read and
written by ``_protocol`` alone.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any

import aiohttp

from .. import wire as protocol
from .._names import DEFAULT_NAMESPACE, DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from ..exceptions import RankNotRegistered, ServerUnavailable
from ..wire import EncoderUrls, ParallelismConfig, RankListing, TransferEngineInfo
from ..wire.kinds import PARALLELISM_CONFIG_ROUTES, TRANSFER_ENGINE_INFO_ROUTES, KindRoutes
from .restarts import Replay
from .retry import Backoff, Deadline
from .transport import Reply, Transport

__all__ = ["BootstrapClient"]

_ENGINE_INFO = TRANSFER_ENGINE_INFO_ROUTES
_CONFIG = PARALLELISM_CONFIG_ROUTES
"""The per-rank kinds, from the server's kind table: their routes and the noun of their 404s."""


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

    async def health(self) -> bool:
        """Whether the server (any replica, tried once each) answers ``/health`` right now."""
        try:
            reply = await self._transport.call("GET", protocol.HEALTH_PATH, Deadline(0), read_timeout=10.0)
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
    ) -> None:
        """Publish ``rank``'s transfer-engine info, replacing any earlier registration of it.

        ``fields`` are more fields of the info, sent as given: a backend-tagged
        registration (``{"backend": "nixl", "agent_name": ..., "agent_metadata":
        ...}``, with no ``session_id``) or anything else the readers want; a
        getter finds them all in :attr:`TransferEngineInfo.fields`. ``role``
        keeps a draft model's records apart from its target's.

        While the server is not up, retries with backoff for up to ``timeout``
        seconds (``None``: for ever), then raises :class:`ServerUnavailable`.
        """
        body = protocol.engine_info_body(rank, session_id, weights_info_dict, fields, role)
        await self._register(_ENGINE_INFO, rank, role, body, timeout)

    async def unregister(self, rank: int, *, role: str = DEFAULT_ROLE, timeout: float | None = 60.0) -> bool:
        """Remove ``rank``'s info; waiters for it go on waiting for a new registration.

        Returns ``False`` when the server had no info for ``rank`` (nothing
        to remove), ``True`` when it removed some.
        """
        return await self._unregister(_ENGINE_INFO, rank, role, timeout)

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
        query = partial(protocol.record_query, rank, after, role=role, whole=whole)
        reply = await self._get_record(_ENGINE_INFO, rank, query, Deadline(timeout))
        return protocol.decode_info(reply.body, role)

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
            return protocol.records_query(spec, after, wait, role=role, whole=whole)

        replies = await self._get_records(_ENGINE_INFO, ranks, query, Deadline(timeout))
        infos: dict[int, TransferEngineInfo] = {}
        for reply in replies:
            infos.update(protocol.decode_batch(reply.body, role))
        return infos

    async def register_parallelism_config(
        self,
        rank: int,
        config: Mapping[str, Any],
        *,
        role: str = DEFAULT_ROLE,
        timeout: float | None = 60.0,
    ) -> None:
        """Publish ``rank``'s parallelism config (any JSON object, kept and served exactly as given).

        Retries an unreachable server like :meth:`register`.
        """
        body = protocol.config_body(rank, config, role)
        await self._register(_CONFIG, rank, role, body, timeout)

    async def unregister_parallelism_config(
        self, rank: int, *, role: str = DEFAULT_ROLE, timeout: float | None = 60.0
    ) -> bool:
        """Remove ``rank``'s parallelism config; whether there was one."""
        return await self._unregister(_CONFIG, rank, role, timeout)

    async def get_parallelism_config(
        self, rank: int, *, timeout: float | None = None, after: int = 0, role: str = DEFAULT_ROLE
    ) -> ParallelismConfig:
        """``rank``'s parallelism config, waiting up to ``timeout`` seconds for it, as :meth:`get` waits.

        Raises :class:`RankNotRegistered` ("No parallelism config for rank N")
        when the time runs out first.
        """
        query = partial(protocol.record_query, rank, after, role=role)
        reply = await self._get_record(_CONFIG, rank, query, Deadline(timeout))
        return protocol.decode_config(reply.body, rank, reply.version, role)

    async def get_parallelism_configs(
        self, ranks: Iterable[int], *, timeout: float | None = None, after: int = 0, role: str = DEFAULT_ROLE
    ) -> dict[int, ParallelismConfig]:
        """Every rank's parallelism config, in batch requests, waiting as :meth:`get_many` does."""

        def query(spec: str, wait: float) -> dict[str, str]:
            return protocol.records_query(spec, after, wait, role=role)

        replies = await self._get_records(_CONFIG, ranks, query, Deadline(timeout))
        configs: dict[int, ParallelismConfig] = {}
        for reply in replies:
            configs.update(protocol.decode_config_batch(reply.body, role))
        return configs

    async def register_encoder_url(self, url: str, *, timeout: float | None = 60.0) -> None:
        """Add ``url`` to the encoder URL list (a URL already listed stays listed once).

        Retries an unreachable server like :meth:`register`; with
        ``reregister=True`` the URL is registered again on a restarted server.
        """
        body = protocol.url_body(url)
        replay = Replay("POST", protocol.ENCODER_REGISTER_PATH, body)
        await self._transport.send_registration((protocol.ENCODER_REGISTER_PATH, url), replay, timeout)

    async def unregister_encoder_url(self, url: str, *, timeout: float | None = 60.0) -> None:
        """Remove ``url`` from the encoder URL list; nothing to do when it is not listed."""
        self._transport.forget_registration((protocol.ENCODER_REGISTER_PATH, url))
        path = protocol.ENCODER_UNREGISTER_PATH
        body = protocol.url_body(url)
        reply = await self._transport.call("DELETE", path, Deadline(timeout), body=body, read_timeout=60.0)
        if reply.status != 200:
            raise self._transport.error(reply.status, path, reply.body)

    async def list_encoder_urls(self, *, timeout: float | None = 60.0) -> list[str]:
        """The encoder URLs, in order of first registration (retrying an unreachable server up to ``timeout``)."""
        path = protocol.ENCODER_LIST_PATH
        query = protocol.encoder_list_query(0, 0.0)
        reply = await self._transport.call("GET", path, Deadline(timeout), params=query, read_timeout=60.0)
        if reply.status != 200:
            raise self._transport.error(reply.status, path, reply.body)
        return protocol.decode_encoder_urls(reply.body).urls

    async def wait_encoder_urls(self, after: int = 0, *, timeout: float | None = None) -> EncoderUrls:
        """The encoder URL list once its version is past ``after``, waiting up to ``timeout`` seconds.

        When the time runs out first, the list as it is (its ``version``
        equal to ``after``): an unchanged list is an answer, not an error.
        Pass the ``version`` of one answer as the ``after`` of the next to
        follow every change; ``timeout=0`` reads the list and its version at
        once. A version below ``after`` (a restarted in-memory server begins
        its versions again) is a change too.
        """
        return await self._encoder_urls(after, Deadline(timeout))

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

    async def list_ranks(self, *, kind: str = TRANSFER_ENGINE_INFO, role: str = DEFAULT_ROLE) -> RankListing:
        """Who has registered a record of ``kind`` and ``role`` (without their values), and,
        with a world size, who has not. ``kind`` is ``transfer_engine_info`` or ``parallelism_config``."""
        query = protocol.listing_query(kind, role)
        reply = await self._transport.call(
            "GET", protocol.RANKS_PATH, Deadline(0), params=query or None, read_timeout=60.0
        )
        if reply.status != 200:
            raise self._transport.error(reply.status, protocol.RANKS_PATH, reply.body)
        return protocol.decode_listing(reply.body)

    # -- plumbing ------------------------------------------------------

    async def _register(
        self, kind: KindRoutes, rank: int, role: str, body: bytes, timeout: float | None
    ) -> None:
        replay = Replay("PUT", kind.register_path, body)
        await self._transport.send_registration((kind.register_path, role, rank), replay, timeout)

    async def _unregister(self, kind: KindRoutes, rank: int, role: str, timeout: float | None) -> bool:
        self._transport.forget_registration((kind.register_path, role, rank))
        reply = await self._transport.call(
            "DELETE",
            kind.register_path,
            Deadline(timeout),
            params=protocol.role_rank_query(rank, role),
            read_timeout=60.0,
        )
        if reply.status == 200:
            return True
        if protocol.decode_absent(reply.status, reply.body, kind.noun) is not None:
            return False
        raise self._transport.error(reply.status, kind.register_path, reply.body)

    async def _get_record(
        self, kind: KindRoutes, rank: int, query: Callable[[float], Mapping[str, str]], deadline: Deadline
    ) -> Reply:
        """The ``200`` of a get of one rank's record of ``kind``, or :class:`RankNotRegistered`."""
        reply = await self._transport.long_poll(kind.get_path, query, deadline, self._found(kind))
        if reply.status != 200:
            missing = protocol.decode_absent(reply.status, reply.body, kind.noun)
            raise RankNotRegistered(missing or [rank], noun=kind.noun)
        return reply

    async def _get_records(
        self,
        kind: KindRoutes,
        ranks: Iterable[int],
        query: Callable[[str, float], Mapping[str, str]],
        deadline: Deadline,
    ) -> list[Reply]:
        """The ``200`` of each batch get of ``ranks``' records of ``kind``, or :class:`RankNotRegistered`
        naming every rank still missing."""
        wanted = sorted(set(ranks))
        if not wanted:
            return []
        specs = protocol.split_rank_specs(wanted)
        found = self._found(kind)
        replies = await asyncio.gather(
            *(
                self._transport.long_poll(kind.batch_path, partial(query, spec), deadline, found)
                for spec in specs
            )
        )
        missing: list[int] = []
        for spec, reply in zip(specs, replies, strict=True):
            if reply.status != 200:
                missing.extend(
                    protocol.decode_absent(reply.status, reply.body, kind.noun) or protocol.parse_ranks(spec)
                )
        if missing:
            raise RankNotRegistered(sorted(missing), noun=kind.noun)
        return list(replies)

    def _found(self, kind: KindRoutes) -> Callable[[str, Reply], bool]:
        """Whether a get's reply ends the wait: a ``200``; "not registered" waits on; anything else raises."""

        def found(path: str, reply: Reply) -> bool:
            if reply.status == 200:
                return True
            if protocol.decode_absent(reply.status, reply.body, kind.noun) is None:
                raise self._transport.error(reply.status, path, reply.body)
            return False

        return found

    async def _encoder_urls(self, after: int, deadline: Deadline) -> EncoderUrls:
        """The list once its version passes ``after``, or as it is when the deadline comes."""
        newest: list[EncoderUrls] = []

        def changed(path: str, reply: Reply) -> bool:
            if reply.status != 200:
                raise self._transport.error(reply.status, path, reply.body)
            newest[:] = [protocol.decode_encoder_urls(reply.body)]
            # Below after: the server lost the list (an in-memory one restarted, its
            # versions begun again), and what it holds now is news to the caller.
            return newest[0].version != after

        await self._transport.long_poll(
            protocol.ENCODER_LIST_PATH, partial(protocol.encoder_list_query, after), deadline, changed
        )
        return newest[0]
