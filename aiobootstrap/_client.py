"""The async client: register a rank's info, and wait for others'.

Theory of operation
-------------------
Three layers, each with one job:

* ``_exchange`` sends one request to one URL. It is the only code that sees
  aiohttp's exceptions: a reply is a status and a body; no reply at all
  (refused, reset, DNS, a read timeout) is ``_Unreachable``.
* ``_call`` makes one exchange succeed: while no replica answers (or one
  answers ``503``), it moves to the next URL, and after a round of failures
  backs off, until the deadline; then :class:`ServerUnavailable`. Before a
  request that parks, it learns the server's boot id (see ``_restarts``).
* ``_long_poll`` makes a wait last the caller's timeout: it asks again past
  the server's ``--max-wait``, and backs off when the server answers
  "not registered" sooner than asked (an old polling server). What ends a
  wait is the caller's to say: a ``200`` for a rank's record, a new version
  for the encoder URL list (which answers ``200`` unchanged at the server's
  deadline).

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
import logging
import ssl
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any, NamedTuple

import aiohttp

from . import _protocol as protocol
from ._kinds import PARALLELISM_CONFIG_KIND, TRANSFER_ENGINE_INFO_KIND, RecordKind
from ._protocol import EncoderUrls, ParallelismConfig, RankListing, TransferEngineInfo
from ._restarts import Replay, RestartWatch
from ._retry import Backoff, Deadline, Replicas
from .exceptions import (
    BootstrapError,
    RankNotRegistered,
    ServerUnavailable,
    UnexpectedReply,
    error_for_status,
)
from .store import DEFAULT_ROLE, TRANSFER_ENGINE_INFO

__all__ = ["BootstrapClient"]

log = logging.getLogger("aiobootstrap.client")

_POLL_CHUNK = 300.0
"""The longest one request asks the server to wait; longer waits ask again."""
_READ_GRACE = 10.0
"""How much longer than its wait a long-poll may take before we call the server hung."""
_HELD_ENOUGH = 1.0
"""A "not registered" held this long (or the whole wait asked) may be asked again at once."""
_POLL_BASE = 0.1
_POLL_CAP = 1.0
"""Back-off between asks of a server that does not wait: at most ~1 request a second once settled."""
_RETRY_STATUSES = frozenset({502, 503, 504})
"""Replies that mean "not now": a server shutting down or full, or a proxy whose server is away."""

# aiohttp 3.10+ refuses a URL that is not http(s) with its own error, not an
# InvalidURL: without it here, such a URL would be retried as unreachable.
_BAD_URL: tuple[type[Exception], ...] = (
    aiohttp.InvalidURL,
    getattr(aiohttp, "NonHttpUrlClientError", aiohttp.InvalidURL),
)


class _Unreachable(Exception):
    """The server did not answer: not up yet, restarting, or the network failed."""


class _Reply(NamedTuple):
    """A reply: its status, its body, and the version its ``X-Aiobootstrap-Version`` header names."""

    status: int
    body: bytes
    version: str | None


_ENGINE_INFO = TRANSFER_ENGINE_INFO_KIND
_CONFIG = PARALLELISM_CONFIG_KIND
"""The per-rank kinds, from the server's kind table: their routes and the noun of their 404s."""


def _replayed(key: Hashable) -> str:
    """What a replayed registration is, for a log line."""
    if isinstance(key, tuple) and len(key) == 3:
        path, role, rank = key
        return f"rank {rank} ({path}, role {role})"
    return f"{key!r}"


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
        namespace: str = protocol.DEFAULT_NAMESPACE,
        reregister: bool = False,
        session: aiohttp.ClientSession | None = None,
        connector: aiohttp.BaseConnector | None = None,
    ) -> None:
        if session is not None and connector is not None:
            raise ValueError("pass session= or connector=, not both: a session has its own connector")
        self._replicas = Replicas(url)
        self.namespace = protocol.check_namespace(namespace)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._ssl = ssl
        self._backoff_template = backoff if backoff is not None else Backoff()
        self._given_session = session
        self._connector = connector
        self._session: aiohttp.ClientSession | None = None
        self._restarts = RestartWatch(reregister)

    @property
    def url(self) -> str:
        """The base URL calls go to now (the first of ``urls`` until one fails)."""
        return self._replicas.current

    @property
    def urls(self) -> tuple[str, ...]:
        """Every base URL the client was given, in order."""
        return self._replicas.urls

    async def __aenter__(self) -> BootstrapClient:
        self._open_session()
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
        session, self._session = self._session, None
        if session is not None and session is not self._given_session:
            await session.close()

    # -- the API -------------------------------------------------------

    async def health(self) -> bool:
        """Whether the server (any replica, tried once each) answers ``/health`` right now."""
        try:
            reply = await self._call("GET", protocol.HEALTH_PATH, Deadline(0), read_timeout=10.0)
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
        await self._send_registration((protocol.ENCODER_REGISTER_PATH, url), replay, timeout)

    async def unregister_encoder_url(self, url: str, *, timeout: float | None = 60.0) -> None:
        """Remove ``url`` from the encoder URL list; nothing to do when it is not listed."""
        self._restarts.forget((protocol.ENCODER_REGISTER_PATH, url))
        path = protocol.ENCODER_UNREGISTER_PATH
        body = protocol.url_body(url)
        reply = await self._call("DELETE", path, Deadline(timeout), body=body, read_timeout=60.0)
        if reply.status != 200:
            raise self._error(reply.status, path, reply.body)

    async def list_encoder_urls(self, *, timeout: float | None = 60.0) -> list[str]:
        """The encoder URLs, in order of first registration (retrying an unreachable server up to ``timeout``)."""
        path = protocol.ENCODER_LIST_PATH
        query = protocol.encoder_list_query(0, 0.0)
        reply = await self._call("GET", path, Deadline(timeout), params=query, read_timeout=60.0)
        if reply.status != 200:
            raise self._error(reply.status, path, reply.body)
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
        reply = await self._call(
            "GET", protocol.RANKS_PATH, Deadline(0), params=query or None, read_timeout=60.0
        )
        if reply.status != 200:
            raise self._error(reply.status, protocol.RANKS_PATH, reply.body)
        return protocol.decode_listing(reply.body)

    # -- plumbing ------------------------------------------------------

    async def _register(
        self, kind: RecordKind, rank: int, role: str, body: bytes, timeout: float | None
    ) -> None:
        replay = Replay("PUT", kind.register_path, body)
        await self._send_registration((kind.register_path, role, rank), replay, timeout)

    async def _send_registration(self, key: Hashable, replay: Replay, timeout: float | None) -> None:
        """Send a registration, remembered (with ``reregister=True``) to be sent again after a restart."""
        # Remembered before sending, so a replay racing this call sends the newest one.
        self._restarts.remember(key, replay)
        try:
            reply = await self._call(
                replay.method, replay.path, Deadline(timeout), body=replay.body, read_timeout=60.0
            )
        except ServerUnavailable:
            self._restarts.forget(key, replay)
            raise
        if reply.status != 200:
            self._restarts.forget(key, replay)
            raise self._error(reply.status, replay.path, reply.body)

    async def _unregister(self, kind: RecordKind, rank: int, role: str, timeout: float | None) -> bool:
        self._restarts.forget((kind.register_path, role, rank))
        reply = await self._call(
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
        raise self._error(reply.status, kind.register_path, reply.body)

    async def _get_record(
        self, kind: RecordKind, rank: int, query: Callable[[float], Mapping[str, str]], deadline: Deadline
    ) -> _Reply:
        """The ``200`` of a get of one rank's record of ``kind``, or :class:`RankNotRegistered`."""
        reply = await self._long_poll(kind.get_path, query, deadline, self._found(kind))
        if reply.status != 200:
            missing = protocol.decode_absent(reply.status, reply.body, kind.noun)
            raise RankNotRegistered(missing or [rank], noun=kind.noun)
        return reply

    async def _get_records(
        self,
        kind: RecordKind,
        ranks: Iterable[int],
        query: Callable[[str, float], Mapping[str, str]],
        deadline: Deadline,
    ) -> list[_Reply]:
        """The ``200`` of each batch get of ``ranks``' records of ``kind``, or :class:`RankNotRegistered`
        naming every rank still missing."""
        wanted = sorted(set(ranks))
        if not wanted:
            return []
        specs = protocol.split_rank_specs(wanted)
        found = self._found(kind)
        replies = await asyncio.gather(
            *(self._long_poll(kind.batch_path, partial(query, spec), deadline, found) for spec in specs)
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

    def _found(self, kind: RecordKind) -> Callable[[str, _Reply], bool]:
        """Whether a get's reply ends the wait: a ``200``; "not registered" waits on; anything else raises."""

        def found(path: str, reply: _Reply) -> bool:
            if reply.status == 200:
                return True
            if protocol.decode_absent(reply.status, reply.body, kind.noun) is None:
                raise self._error(reply.status, path, reply.body)
            return False

        return found

    async def _encoder_urls(self, after: int, deadline: Deadline) -> EncoderUrls:
        """The list once its version passes ``after``, or as it is when the deadline comes."""
        newest: list[EncoderUrls] = []

        def changed(path: str, reply: _Reply) -> bool:
            if reply.status != 200:
                raise self._error(reply.status, path, reply.body)
            newest[:] = [protocol.decode_encoder_urls(reply.body)]
            # Below after: the server lost the list (an in-memory one restarted, its
            # versions begun again), and what it holds now is news to the caller.
            return newest[0].version != after

        await self._long_poll(
            protocol.ENCODER_LIST_PATH, partial(protocol.encoder_list_query, after), deadline, changed
        )
        return newest[0]

    async def _long_poll(
        self,
        path: str,
        query: Callable[[float], Mapping[str, str]],
        deadline: Deadline,
        done: Callable[[str, _Reply], bool],
    ) -> _Reply:
        """Wait until ``done`` says a reply ends the wait or the deadline passes, asking again
        past the server's cap; the last reply (which ``done`` may have refused: the time ran out)."""
        loop = asyncio.get_running_loop()
        early = Backoff(_POLL_BASE, _POLL_CAP)
        while True:
            wait = min(deadline.remaining(), _POLL_CHUNK)
            asked_at = loop.time()
            reply = await self._call(
                "GET",
                path,
                deadline,
                params=query(wait),
                read_timeout=wait + _READ_GRACE,
                parks=wait > 0,
            )
            if done(path, reply) or deadline.expired():
                return reply
            held = loop.time() - asked_at
            if held < min(wait, _HELD_ENOUGH):
                # Answered before the wait we asked for: a server that does not
                # wait (an old polling one, --max-wait 0). Asking again at once
                # would be thousands of requests a second; one request per
                # backoff step instead, the time the server held counted in.
                pause = early.next_delay() - held
                if pause > 0:
                    await asyncio.sleep(min(pause, deadline.remaining()))
            else:
                early.reset()

    async def _call(
        self,
        method: str,
        path: str,
        deadline: Deadline,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        read_timeout: float,
        parks: bool = False,
    ) -> _Reply:
        """One exchange, moved to the next replica and retried with backoff while
        none answers (or all answer ``503``), until the deadline."""
        backoff = Backoff(self._backoff_template.base, self._backoff_template.cap)
        failures = 0  # in this round of the replicas
        while True:
            url = self._replicas.current
            try:
                if self._restarts.should_probe(parks):
                    # Learn the boot before asking: a parked request would learn it only when it ends.
                    await self._restarts.probe(partial(self._probe, url))
                    await self._refill_if_restarted(url)
                reply = await self._exchange(
                    url, method, path, params=params, body=body, timeout=read_timeout
                )
                if await self._refill_if_restarted(url):
                    continue  # ask again: the answer came from the server before it was refilled
            except _Unreachable as exc:
                failure: str = f"{self._replicas.describe()} could not be reached: {exc}"
            else:
                if reply.status not in _RETRY_STATUSES:
                    return reply
                failure = protocol.error_detail(reply.status, reply.body)
            self._restarts.went_away()
            self._replicas.failed(url)
            failures += 1
            if failures < len(self._replicas.urls):
                continue  # the next replica, at once
            if deadline.expired():
                raise ServerUnavailable(failure)
            failures = 0
            # Not up yet, shutting down or full: it (or another) may answer soon.
            await asyncio.sleep(min(backoff.next_delay(), deadline.remaining()))

    async def _exchange(
        self,
        url: str,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        timeout: float,
    ) -> _Reply:
        session = self._open_session()
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = protocol.JSON_TYPE
        try:
            async with session.request(
                method,
                url + protocol.path(path, self.namespace),
                params=params,
                data=body,
                headers=headers,
                ssl=self._ssl,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=timeout),
            ) as response:
                self._restarts.saw(response.headers.get(protocol.BOOT_HEADER))
                body = await response.read()
                return _Reply(response.status, body, response.headers.get(protocol.VERSION_HEADER))
        except _BAD_URL as exc:
            raise BootstrapError(f"Invalid server URL {url!r}.") from exc
        except aiohttp.ClientSSLError as exc:
            raise BootstrapError(f"TLS with {url} failed: {exc}") from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _Unreachable(str(exc) or type(exc).__name__) from exc

    async def _probe(self, url: str) -> _Reply:
        return await self._exchange(url, "GET", protocol.HEALTH_PATH, timeout=10.0)

    async def _refill_if_restarted(self, url: str) -> bool:
        """Re-register our ranks if the server restarted since we registered them; whether we did."""
        async with self._restarts.lock:
            replay = self._restarts.take_replay()
            for key, (method, path, body) in replay.items():
                try:
                    reply = await self._exchange(url, method, path, body=body, timeout=60.0)
                except _Unreachable:
                    self._restarts.replay_failed()
                    raise
                if reply.status != 200:
                    detail = protocol.error_detail(reply.status, reply.body)
                    log.warning("re-registering %s failed: %s", _replayed(key), detail)
            if replay:
                log.info("the server at %s restarted; re-registered %d records", url, len(replay))
            return bool(replay)

    def _open_session(self) -> aiohttp.ClientSession:
        if self._given_session is not None:
            if self._given_session.closed:
                raise BootstrapError("The session given to BootstrapClient is closed.")
            return self._given_session
        if self._session is None or self._session.closed:
            # limit=0: no cap on connections, for every parked get holds one.
            connector = self._connector if self._connector is not None else aiohttp.TCPConnector(limit=0)
            self._session = aiohttp.ClientSession(
                connector=connector, connector_owner=self._connector is None
            )
        return self._session

    def _error(self, status: int, path: str, payload: bytes) -> BootstrapError:
        detail = protocol.error_detail(status, payload)
        if status == 404:
            # Not "not registered" (the protocol module said so): the route itself is not there.
            return UnexpectedReply(
                f"{self.url}{protocol.path(path, self.namespace)} answered 404 ({detail}): "
                "is that the base URL of an aiobootstrap server?"
            )
        return error_for_status(status, detail)
