"""The client's transport: requests to one registry, made to succeed across replicas and restarts.

Theory of operation
-------------------
Three layers, each with one job:

* ``exchange`` sends one request to one URL. It is the only code that sees
  aiohttp's exceptions: a reply is a status and a body, read up to a bound
  (``max_reply_size`` per rank the reply may hold; past it the reply is an
  :class:`UnexpectedReply`, read no further); no reply at all (refused,
  reset, DNS, a read timeout) is ``Unreachable``.
* :meth:`Transport.call` makes one exchange succeed: while no replica answers
  (or one answers ``503``), it moves to the next URL, and after a round of
  failures backs off, until the deadline; then :class:`ServerUnavailable`.
  Each try ends by the deadline plus one round trip (``retry.ROUND_TRIP``)
  whatever the server does (holds the request, drips or streams its reply),
  so a call ends by its timeout plus one round trip. Before a request that
  parks, it learns the server's boot id (see ``restarts``), and after a
  restart it replays the registrations it was asked to remember.
* :meth:`Transport.long_poll` makes a wait last the caller's timeout: it asks
  again past the server's ``--max-wait``, and backs off when the server
  answers "not registered" sooner than asked (an old polling server). What
  ends a wait is the caller's to say: a ``200`` for a rank's record, a new
  version for the encoder URL list (which answers ``200`` unchanged at the
  server's deadline).

Where and how long to wait between tries (replicas, backoff, deadlines) is
``retry``'s; what a reply means is the wire's (``aiobootstrap.wire``) and the client's.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import partial

import aiohttp

from ..exceptions import BootstrapError, ServerUnavailable, UnexpectedReply
from ..wire import routes
from ..wire.errors import decode_error, error_detail
from ..wire.leases import decode_lease_missing
from .exchange import Reply, Unreachable, exchange
from .restarts import Replay, RestartWatch
from .retry import ROUND_TRIP, Backoff, Deadline, Replicas

__all__ = ["Reply", "Transport"]

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
_REPLY_FIELDS = 1024
"""Bytes a reply may hold per rank beyond ``max_reply_size``: its own fields (rank, version, keys)."""
_RETRY_STATUSES = frozenset({502, 503, 504})
"""Replies that mean "not now": a server shutting down or full, or a proxy whose server is away."""


def _replayed(key: Hashable) -> str:
    """What a replayed registration is, for a log line."""
    if isinstance(key, tuple) and len(key) == 3:
        path, role, rank = key
        return f"rank {rank} ({path}, role {role})"
    return f"{key!r}"


class Transport:
    """Requests to the replicas of one registry, over one ``aiohttp.ClientSession``.

    The session is the caller's (``session=``), or made on first use over the
    caller's ``connector=`` or a connector with no cap on connections (every
    parked long-poll holds one); :meth:`close` closes only a session made here.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        token: str | None,
        ssl: ssl.SSLContext | bool,
        backoff: Backoff | None,
        namespace: str,
        reregister: bool,
        session: aiohttp.ClientSession | None,
        connector: aiohttp.BaseConnector | None,
        max_reply_size: int | None,
    ) -> None:
        if session is not None and connector is not None:
            raise ValueError("pass session= or connector=, not both: a session has its own connector")
        if max_reply_size is not None and max_reply_size < 1:
            raise ValueError(f"max_reply_size must be at least 1 byte (or None), not {max_reply_size}")
        self._max_reply_size = max_reply_size
        self._replicas = Replicas(url)
        self.namespace = routes.check_namespace(namespace)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._ssl = ssl
        self._backoff_template = backoff if backoff is not None else Backoff()
        self._given_session = session
        self._connector = connector
        self._session: aiohttp.ClientSession | None = None
        self._restarts = RestartWatch(reregister)
        self._failed_tries = 0  # since a server last answered: logged once when one does
        self.unregistered: list[Callable[[Hashable], None]] = []
        """Called with each registration's key once it is no longer sent again (the client's leases drop it)."""

    @property
    def url(self) -> str:
        """The base URL calls go to now (the first of ``urls`` until one fails)."""
        return self._replicas.current

    @property
    def urls(self) -> tuple[str, ...]:
        """Every base URL the transport was given, in order."""
        return self._replicas.urls

    def open(self) -> aiohttp.ClientSession:
        """The session calls go through, made now if there is none (or it was closed)."""
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

    async def close(self) -> None:
        """Close the session made here; a session or connector given stays open."""
        session, self._session = self._session, None
        if session is not None and session is not self._given_session:
            await session.close()

    async def send_registration(self, key: Hashable, replay: Replay, timeout: float | None) -> None:
        """Send a registration, remembered (with ``reregister=True``) to be sent again after a restart."""
        # Remembered before sending, so a replay racing this call sends the newest one.
        self._restarts.remember(key, replay)
        try:
            reply = await self.call(
                replay.method,
                replay.path,
                Deadline(timeout),
                params=replay.params,
                body=replay.body,
                read_timeout=60.0,
            )
        except ServerUnavailable:
            self._restarts.forget(key, replay)
            raise
        if reply.status != 200:
            self._restarts.forget(key, replay)
            raise self.error(reply.status, replay.path, reply.body)

    def forget_registration(self, key: Hashable) -> None:
        """Send the registration named ``key`` no more after a restart (nor after a lease's re-grant)."""
        self._restarts.forget(key)
        for drop in self.unregistered:
            drop(key)

    async def long_poll(
        self,
        path: str,
        query: Callable[[float], Mapping[str, str]],
        deadline: Deadline,
        done: Callable[[str, Reply], bool],
        *,
        ranks: int = 1,
    ) -> Reply:
        """Wait until ``done`` says a reply ends the wait or the deadline passes, asking again
        past the server's cap; the last reply (which ``done`` may have refused: the time ran out).
        ``ranks``: how many ranks the reply may hold (the reply bound is per rank)."""
        loop = asyncio.get_running_loop()
        early = Backoff(_POLL_BASE, _POLL_CAP)
        # The boot an after= came from (the last one seen when the wait began, else its first
        # reply's): a server of another incarnation then counts after= as 0 (&boot=).
        boot = self._restarts.boot
        wait = asked_at = 0.0

        def ask() -> Mapping[str, str]:
            # Asked anew at each try of the call: a try after a failure (a restart, a 503) asks
            # the server to wait only what is left, or the reply would come past the deadline.
            nonlocal wait, asked_at
            wait, asked_at = min(deadline.remaining(), _POLL_CHUNK), loop.time()
            params = query(wait)
            if boot is not None and "boot" not in params and params.get("after", "0") != "0":
                params = {**params, "boot": boot}
            return params

        while True:
            first_wait = min(deadline.remaining(), _POLL_CHUNK)
            reply = await self.call(
                "GET",
                path,
                deadline,
                params=ask,
                read_timeout=first_wait + _READ_GRACE,
                parks=first_wait > 0,
                ranks=ranks,
            )
            boot = boot if boot is not None else reply.boot
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

    async def call(
        self,
        method: str,
        path: str,
        deadline: Deadline,
        *,
        params: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        read_timeout: float,
        parks: bool = False,
        ranks: int = 1,
    ) -> Reply:
        """One exchange, moved to the next replica and retried with backoff while
        none answers (or all answer ``503``), until the deadline.

        ``params`` may be a function, asked at each try for the query to send then
        (a long-poll's wait is what is left of the deadline when the try is made).

        Each try (the boot probe and the replays before it included) ends by the
        deadline plus one round trip (``Deadline.left``), whatever the server
        does; a reply larger than the bound for ``ranks`` ranks is refused unread.
        """
        backoff = Backoff(self._backoff_template.base, self._backoff_template.cap)
        failures = 0  # in this round of the replicas
        failure = f"{self._replicas.describe()} was not asked: the call's time ran out first"
        while True:
            url = self._replicas.current
            left = deadline.left()
            if left is not None and left <= 0:
                raise ServerUnavailable(failure)
            try:
                async with asyncio.timeout(left):
                    if self._restarts.should_probe(parks):
                        # Learn the boot before asking: a parked request would learn it only when it ends.
                        await self._restarts.probe(partial(self._probe, url))
                        await self._refill_if_restarted(url)
                    asked = params() if callable(params) else params
                    reply = await self._exchange(
                        url,
                        method,
                        path,
                        params=asked,
                        body=body,
                        headers=headers,
                        timeout=read_timeout,
                        ranks=ranks,
                    )
                    if await self._refill_if_restarted(url):
                        continue  # ask again: the answer came from the server before it was refilled
            except Unreachable as exc:
                failure = f"{self._replicas.describe()} could not be reached: {exc}"
            except TimeoutError:
                failure = (
                    f"The server at {url} did not answer within the call's timeout "
                    f"(and {ROUND_TRIP:g} s more for one round trip)"
                )
            else:
                if reply.status not in _RETRY_STATUSES:
                    if self._failed_tries:
                        log.info("the server at %s answers, after %d failed tries", url, self._failed_tries)
                        self._failed_tries = 0
                    return reply
                failure = error_detail(reply.status, reply.body)
            self._restarts.went_away()
            self._replicas.failed(url)
            self._failed_tries += 1
            failures += 1
            if failures < len(self._replicas.urls):
                log.debug("%s %s: %s; trying the next replica", method, path, failure)
                continue  # the next replica, at once
            if deadline.expired():
                raise ServerUnavailable(failure)
            failures = 0
            # Not up yet, shutting down or full: it (or another) may answer soon.
            delay = min(backoff.next_delay(), deadline.remaining())
            log.debug("%s %s: %s; trying again in %.3g s", method, path, failure, delay)
            await asyncio.sleep(delay)
            if deadline.expired():
                # Slept to the deadline: a try now would ask a wait of nothing, whose answer
                # ("not registered") would hide why the call failed (a restart, a limit).
                raise ServerUnavailable(failure)

    def error(self, status: int, path: str, payload: bytes) -> BootstrapError:
        """The error a reply other than the one asked for means."""
        lost = decode_lease_missing(status, payload)
        if lost is not None:
            return lost
        if status == 404:
            # Not "not registered" (the wire said so): the route itself is not there.
            return UnexpectedReply(
                f"{self.url}{routes.path(path, self.namespace)} answered 404 "
                f"({error_detail(status, payload)}): is that the base URL of an aiobootstrap server?"
            )
        return decode_error(status, payload)

    async def _exchange(
        self,
        url: str,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float,
        ranks: int = 1,
    ) -> Reply:
        """One request to ``url``, its reply bounded by ``max_reply_size`` for ``ranks`` ranks."""
        sent = dict(self._headers) if headers is None else {**self._headers, **headers}
        if body is not None:
            sent["Content-Type"] = routes.JSON_TYPE
        bound = None if self._max_reply_size is None else ranks * (self._max_reply_size + _REPLY_FIELDS)
        return await exchange(
            self.open(),
            method,
            url,
            routes.path(path, self.namespace),
            params=params,
            body=body,
            headers=sent,
            ssl=self._ssl,
            read_timeout=timeout,
            bound=bound,
            saw_boot=self._restarts.saw,
        )

    async def _probe(self, url: str) -> Reply:
        return await self._exchange(url, "GET", routes.HEALTH_PATH, timeout=10.0)

    async def _refill_if_restarted(self, url: str) -> bool:
        """Re-register our ranks if the server restarted since we registered them; whether we did."""
        async with self._restarts.lock:
            replay = self._restarts.take_replay()
            for key, sent in replay.items():
                try:
                    reply = await self._exchange(
                        url, sent.method, sent.path, params=sent.params, body=sent.body, timeout=60.0
                    )
                except BaseException:  # unreachable, or the call's time ran out: replay it all next time
                    self._restarts.replay_failed()
                    raise
                if reply.status != 200:
                    detail = error_detail(reply.status, reply.body)
                    log.warning("re-registering %s failed: %s", _replayed(key), detail)
            if replay:
                log.info("the server at %s restarted; re-registered %d records", url, len(replay))
            return bool(replay)
