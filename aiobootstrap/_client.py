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
  "not registered" sooner than asked (an old polling server).

The wire (paths, bodies, which ``404`` means "not registered") is read and
written by ``_protocol`` alone.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any

import aiohttp

from . import _protocol as protocol
from ._protocol import RankListing, TransferEngineInfo
from ._restarts import RestartWatch
from ._retry import Backoff, Deadline, Replicas
from .exceptions import (
    BootstrapError,
    RankNotRegistered,
    ServerUnavailable,
    UnexpectedReply,
    error_for_status,
)

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
            status, _ = await self._call("GET", protocol.HEALTH_PATH, Deadline(0), read_timeout=10.0)
        except ServerUnavailable:
            return False
        return status == 200

    async def register(
        self,
        rank: int,
        *,
        session_id: str,
        weights_info_dict: Mapping[str, Any],
        timeout: float | None = 60.0,
    ) -> None:
        """Publish ``rank``'s info, replacing any earlier registration of it.

        While the server is not up, retries with backoff for up to ``timeout``
        seconds (``None``: for ever), then raises :class:`ServerUnavailable`.
        """
        body = protocol.registration_body(rank, session_id, weights_info_dict)
        deadline = Deadline(timeout)
        # Remembered before sending, so a replay racing this call sends the newest info.
        self._restarts.remember(rank, body)
        try:
            status, payload = await self._call(
                "PUT", protocol.REGISTER_PATH, deadline, body=body, read_timeout=60.0
            )
        except ServerUnavailable:
            self._restarts.forget(rank, body)
            raise
        if status != 200:
            self._restarts.forget(rank, body)
            raise self._error(status, protocol.REGISTER_PATH, payload)

    async def unregister(self, rank: int, *, timeout: float | None = 60.0) -> bool:
        """Remove ``rank``'s info; waiters for it go on waiting for a new registration.

        Returns ``False`` when the server had no info for ``rank`` (nothing
        to remove), ``True`` when it removed some.
        """
        self._restarts.forget(rank)
        status, payload = await self._call(
            "DELETE",
            protocol.REGISTER_PATH,
            Deadline(timeout),
            params=protocol.rank_query(rank),
            read_timeout=60.0,
        )
        if status == 200:
            return True
        if protocol.decode_not_registered(status, payload) is not None:
            return False
        raise self._error(status, protocol.REGISTER_PATH, payload)

    async def get(self, rank: int, *, timeout: float | None = None, after: int = 0) -> TransferEngineInfo:
        """``rank``'s info, waiting up to ``timeout`` seconds for it to register.

        ``timeout=None`` waits for ever; ``0`` asks once. ``after=V`` waits
        for a registration newer than version ``V``. Raises
        :class:`RankNotRegistered` when the server said "not registered"
        until the time ran out, :class:`ServerUnavailable` when it did not
        answer.
        """
        query = partial(protocol.get_query, rank, after)
        payload, missing = await self._long_poll(protocol.GET_PATH, query, Deadline(timeout))
        if payload is None:
            raise RankNotRegistered(missing or [rank])
        return protocol.decode_info(payload)

    async def get_many(
        self, ranks: Iterable[int], *, timeout: float | None = None, after: int = 0
    ) -> dict[int, TransferEngineInfo]:
        """Every rank's info, in one batch request per few thousand ranks.

        Waits like :meth:`get`; on timeout raises :class:`RankNotRegistered`
        naming every rank still missing.
        """
        wanted = sorted(set(ranks))
        if not wanted:
            return {}
        deadline = Deadline(timeout)
        specs = protocol.split_rank_specs(wanted)
        results = await asyncio.gather(*(self._get_batch(spec, deadline, after) for spec in specs))
        infos: dict[int, TransferEngineInfo] = {}
        missing: list[int] = []
        for found, absent in results:
            infos.update(found)
            missing.extend(absent)
        if missing:
            raise RankNotRegistered(sorted(missing))
        return infos

    async def list_ranks(self) -> RankListing:
        """Who has registered (without their weights), and, with a world size, who has not."""
        status, payload = await self._call("GET", protocol.RANKS_PATH, Deadline(0), read_timeout=60.0)
        if status != 200:
            raise self._error(status, protocol.RANKS_PATH, payload)
        return protocol.decode_listing(payload)

    # -- plumbing ------------------------------------------------------

    async def _get_batch(
        self, spec: str, deadline: Deadline, after: int
    ) -> tuple[dict[int, TransferEngineInfo], list[int]]:
        query = partial(protocol.batch_query, spec, after)
        payload, missing = await self._long_poll(protocol.BATCH_PATH, query, deadline)
        if payload is None:
            return {}, missing or protocol.parse_ranks(spec)
        return protocol.decode_batch(payload), []

    async def _long_poll(
        self, path: str, query: Callable[[float], Mapping[str, str]], deadline: Deadline
    ) -> tuple[bytes | None, list[int]]:
        """Wait until the deadline, asking again past the server's cap: a 200's body, or
        ``None`` and the ranks the last "not registered" reply named."""
        loop = asyncio.get_running_loop()
        early = Backoff(_POLL_BASE, _POLL_CAP)
        while True:
            wait = min(deadline.remaining(), _POLL_CHUNK)
            asked_at = loop.time()
            status, payload = await self._call(
                "GET",
                path,
                deadline,
                params=query(wait),
                read_timeout=wait + _READ_GRACE,
                parks=wait > 0,
            )
            if status == 200:
                return payload, []
            missing = protocol.decode_not_registered(status, payload)
            if missing is None:
                raise self._error(status, path, payload)
            if deadline.expired():
                return None, missing
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
    ) -> tuple[int, bytes]:
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
                status, payload = await self._exchange(
                    url, method, path, params=params, body=body, timeout=read_timeout
                )
                if await self._refill_if_restarted(url):
                    continue  # ask again: the answer came from the server before it was refilled
            except _Unreachable as exc:
                failure: str = f"{self._replicas.describe()} could not be reached: {exc}"
            else:
                if status not in _RETRY_STATUSES:
                    return status, payload
                failure = protocol.error_detail(status, payload)
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
    ) -> tuple[int, bytes]:
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
                return response.status, await response.read()
        except _BAD_URL as exc:
            raise BootstrapError(f"Invalid server URL {url!r}.") from exc
        except aiohttp.ClientSSLError as exc:
            raise BootstrapError(f"TLS with {url} failed: {exc}") from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _Unreachable(str(exc) or type(exc).__name__) from exc

    async def _probe(self, url: str) -> tuple[int, bytes]:
        return await self._exchange(url, "GET", protocol.HEALTH_PATH, timeout=10.0)

    async def _refill_if_restarted(self, url: str) -> bool:
        """Re-register our ranks if the server restarted since we registered them; whether we did."""
        async with self._restarts.lock:
            replay = self._restarts.take_replay()
            for rank, body in replay.items():
                try:
                    status, payload = await self._exchange(
                        url, "PUT", protocol.REGISTER_PATH, body=body, timeout=60.0
                    )
                except _Unreachable:
                    self._restarts.replay_failed()
                    raise
                if status != 200:
                    detail = protocol.error_detail(status, payload)
                    log.warning("re-registering rank %d failed: %s", rank, detail)
            if replay:
                log.info("the server at %s restarted; re-registered %d ranks", url, len(replay))
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
