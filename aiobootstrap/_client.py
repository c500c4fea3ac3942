"""The async client: register a rank's info, and wait for others'.

Transport failures are mapped to aiobootstrap errors in one place
(``_exchange``); everything above it speaks in statuses and bodies.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import ssl
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

import aiohttp

from . import _protocol as protocol
from ._protocol import RankListing, TransferEngineInfo
from .exceptions import (
    BootstrapError,
    RankNotRegistered,
    ServerUnavailable,
    error_for_status,
)

__all__ = ["Backoff", "BootstrapClient"]

log = logging.getLogger("aiobootstrap.client")

_POLL_CHUNK = 300.0
"""The longest one request asks the server to wait; longer waits ask again."""
_READ_GRACE = 10.0
"""How much longer than its wait a long-poll may take before we call the server hung."""


# aiohttp 3.10+ refuses a URL that is not http(s) with its own error, not an
# InvalidURL: without it here, such a URL would be retried as unreachable.
_BAD_URL: tuple[type[Exception], ...] = (
    aiohttp.InvalidURL,
    getattr(aiohttp, "NonHttpUrlClientError", aiohttp.InvalidURL),
)


class _Unreachable(Exception):
    """The server did not answer: not up yet, restarting, or the network failed."""


class Backoff:
    """Exponential backoff with jitter: 50 ms, 100 ms, ... up to ``cap`` seconds."""

    def __init__(self, base: float = 0.05, cap: float = 2.0) -> None:
        self.base = base
        self.cap = cap
        self.attempt = 0

    def next_delay(self) -> float:
        delay = min(self.cap, self.base * 2**self.attempt)
        self.attempt += 1
        # Jitter keeps a whole deployment's clients from retrying in lockstep.
        return float(delay * random.uniform(0.5, 1.0))


class _Deadline:
    def __init__(self, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._at = math.inf if timeout is None else loop.time() + max(0.0, timeout)

    def remaining(self) -> float:
        return max(0.0, self._at - self._loop.time())

    def expired(self) -> bool:
        return self.remaining() <= 0


class BootstrapClient:
    """An async client for an aiobootstrap (or compatible) server.

    ::

        async with BootstrapClient("http://10.0.0.1:6789") as client:
            await client.register(3, session_id="10.0.0.7:18000", weights_info_dict={})
            info = await client.get(3, timeout=60.0)

    One ``aiohttp.ClientSession`` serves every call; close the client (or use
    ``async with``) to release it. ``namespace=`` addresses one deployment
    on a server that hosts several (see ``docs/operators.md``).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        ssl: ssl.SSLContext | bool = True,
        backoff: Backoff | None = None,
        namespace: str = protocol.DEFAULT_NAMESPACE,
        reregister: bool = False,
    ) -> None:
        self.url = url.rstrip("/")
        self.namespace = protocol.check_namespace(namespace)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._ssl = ssl
        self._backoff_template = backoff if backoff is not None else Backoff()
        self._session: aiohttp.ClientSession | None = None
        self._restarts = _RestartWatch(reregister)

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
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    # -- the API -------------------------------------------------------

    async def health(self) -> bool:
        """Whether the server answers ``/health`` right now."""
        try:
            status, _ = await self._exchange("GET", protocol.HEALTH_PATH, timeout=10.0)
            await self._refill_if_restarted()
        except _Unreachable:
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
        deadline = _Deadline(timeout)
        # Remembered before sending, so a replay racing this call sends the newest info.
        self._restarts.remember(rank, body)
        status, payload = await self._call(
            "PUT", protocol.REGISTER_PATH, deadline, body=body, read_timeout=60.0
        )
        if status != 200:
            self._restarts.forget(rank, body)
            raise self._error(status, payload)

    async def unregister(self, rank: int, *, timeout: float | None = 60.0) -> bool:
        """Remove ``rank``'s info; waiters for it go on waiting for a new registration.

        Returns ``False`` when the server had no info for ``rank`` (nothing
        to remove), ``True`` when it removed some.
        """
        self._restarts.forget(rank)
        status, payload = await self._call(
            "DELETE",
            protocol.REGISTER_PATH,
            _Deadline(timeout),
            params={"rank": str(rank)},
            read_timeout=60.0,
        )
        if status == 200:
            return True
        if status == 404 and _names_missing(payload) is not None:
            return False
        raise self._error(status, payload)

    async def get(self, rank: int, *, timeout: float | None = None, after: int = 0) -> TransferEngineInfo:
        """``rank``'s info, waiting up to ``timeout`` seconds for it to register.

        ``timeout=None`` waits for ever; ``0`` asks once. ``after=V`` waits
        for a registration newer than version ``V``. Raises
        :class:`RankNotRegistered` when the time runs out.
        """
        params = {"rank": str(rank), "after": str(after)}
        payload, _ = await self._long_poll(protocol.GET_PATH, params, _Deadline(timeout), [rank])
        if payload is None:
            raise RankNotRegistered([rank])
        return protocol.decode_info(protocol.loads(payload))

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
        deadline = _Deadline(timeout)
        specs = _split_rank_specs(wanted)
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
        status, payload = await self._call("GET", protocol.RANKS_PATH, _Deadline(0), read_timeout=60.0)
        if status != 200:
            raise self._error(status, payload)
        return protocol.decode_listing(protocol.loads(payload))

    # -- plumbing ------------------------------------------------------

    async def _get_batch(
        self, spec: str, deadline: _Deadline, after: int
    ) -> tuple[dict[int, TransferEngineInfo], list[int]]:
        asked = protocol.parse_ranks(spec)
        params = {"ranks": spec, "after": str(after)}
        payload, missing = await self._long_poll(protocol.BATCH_PATH, params, deadline, asked)
        if payload is None:
            return {}, missing
        return protocol.decode_batch(protocol.loads(payload)), []

    async def _long_poll(
        self, path: str, params: Mapping[str, str], deadline: _Deadline, asked: list[int]
    ) -> tuple[bytes | None, list[int]]:
        """Wait for ``asked``, asking again past the server's cap: a 200's body, or
        ``None`` and the ranks still missing when the deadline passed."""
        while True:
            wait = min(deadline.remaining(), _POLL_CHUNK)
            try:
                status, payload = await self._call(
                    "GET",
                    path,
                    deadline,
                    params={**params, "wait": f"{wait:.3f}"},
                    read_timeout=wait + _READ_GRACE,
                )
            except ServerUnavailable as exc:
                detail = f"{protocol.missing_ranks_detail(asked)}: {exc.detail}"
                raise RankNotRegistered(asked, detail) from exc
            if status == 200:
                return payload, []
            missing = _names_missing(payload)
            if status != 404 or missing is None:
                raise self._error(status, payload)
            if deadline.expired():
                # A single get's 404 names its rank in the detail only.
                return None, missing or asked

    async def _call(
        self,
        method: str,
        path: str,
        deadline: _Deadline,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        read_timeout: float,
    ) -> tuple[int, bytes]:
        """One exchange, retried with backoff while the server is down or busy."""
        backoff = Backoff(self._backoff_template.base, self._backoff_template.cap)
        while True:
            try:
                if self._restarts.suspect:
                    # It went away: learn whether it came back empty before asking it anything.
                    await self._exchange("GET", protocol.HEALTH_PATH, timeout=10.0)
                    self._restarts.suspect = False
                    await self._refill_if_restarted()
                status, payload = await self._exchange(
                    method, path, params=params, body=body, timeout=read_timeout
                )
                if await self._refill_if_restarted():
                    continue  # ask again: the answer came from the server before it was refilled
            except _Unreachable as exc:
                self._restarts.went_away()
                if deadline.expired():
                    raise ServerUnavailable(f"The server at {self.url} could not be reached: {exc}") from exc
                await asyncio.sleep(min(backoff.next_delay(), deadline.remaining()))
                continue
            if status == 503:
                self._restarts.went_away()
                if deadline.expired():
                    raise ServerUnavailable(_detail(status, payload))
                # Shutting down or full: another instance (or this one, restarted) may answer soon.
                await asyncio.sleep(min(backoff.next_delay(), deadline.remaining()))
                continue
            return status, payload

    async def _exchange(
        self,
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
                self.url + protocol.path(path, self.namespace),
                params=params,
                data=body,
                headers=headers,
                ssl=self._ssl,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=timeout),
            ) as response:
                self._restarts.saw(response.headers.get(protocol.BOOT_HEADER))
                return response.status, await response.read()
        except _BAD_URL as exc:
            raise BootstrapError(f"Invalid server URL {self.url!r}.") from exc
        except aiohttp.ClientSSLError as exc:
            raise BootstrapError(f"TLS with {self.url} failed: {exc}") from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _Unreachable(str(exc) or type(exc).__name__) from exc

    async def _refill_if_restarted(self) -> bool:
        """Re-register our ranks if the server restarted since we registered them; whether we did."""
        async with self._restarts.lock:
            replay = self._restarts.take_replay()
            for rank, body in replay.items():
                try:
                    status, payload = await self._exchange(
                        "PUT", protocol.REGISTER_PATH, body=body, timeout=60.0
                    )
                except _Unreachable:
                    self._restarts.replay_failed()
                    raise
                if status != 200:
                    log.warning("re-registering rank %d failed: %s", rank, _detail(status, payload))
            if replay:
                log.info("the server at %s restarted; re-registered %d ranks", self.url, len(replay))
            return bool(replay)

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    def _error(self, status: int, payload: bytes) -> BootstrapError:
        return error_for_status(status, _detail(status, payload))


class _RestartWatch:
    """What the client knows of the server's boots, and the registrations to replay after one.

    Every reply names the server's boot id; a new id means the server
    restarted, and an in-memory server lost what we had registered.
    """

    def __init__(self, reregister: bool) -> None:
        self.enabled = reregister
        self.boot: str | None = None
        self.suspect = False
        """The server failed to answer: ask its boot before the next call."""
        self.lock = asyncio.Lock()
        self._registrations: dict[int, bytes] = {}
        self._pending = False

    def remember(self, rank: int, body: bytes) -> None:
        if self.enabled:
            self._registrations[rank] = body

    def forget(self, rank: int, body: bytes | None = None) -> None:
        if body is None or self._registrations.get(rank) == body:
            self._registrations.pop(rank, None)

    def went_away(self) -> None:
        self.suspect = self.enabled and bool(self._registrations)

    def saw(self, boot: str | None) -> None:
        if boot is None or boot == self.boot:
            return
        if self.boot is not None and self.enabled:
            self._pending = True
        self.boot = boot

    def take_replay(self) -> dict[int, bytes]:
        """The registrations to send again, once per restart seen."""
        if not self._pending:
            return {}
        self._pending = False
        return dict(self._registrations)

    def replay_failed(self) -> None:
        self._pending = True


def _detail(status: int, payload: bytes) -> str:
    try:
        detail = protocol.loads(payload)["detail"]
    except (ValueError, TypeError, KeyError):
        return f"The server answered HTTP {status}."
    return str(detail)


def _names_missing(payload: bytes) -> list[int] | None:
    """The ranks a 404 reply names as missing; ``None`` for a 404 of another kind."""
    try:
        reply = protocol.loads(payload)
    except ValueError:
        return None
    if not isinstance(reply, dict):
        return None
    if "missing" in reply:
        return [int(rank) for rank in reply["missing"]]
    detail = reply.get("detail")
    if isinstance(detail, str) and detail.startswith("No transfer engine info for rank "):
        return []
    return None


def _split_rank_specs(ranks: list[int]) -> list[str]:
    """``ranks`` as rank specs, each short enough for one request's query string."""
    specs: list[str] = []
    parts: list[str] = []
    length = 0
    for part in protocol.format_ranks(ranks).split(","):
        if parts and length + len(part) > protocol.BATCH_QUERY_CHARS:
            specs.append(",".join(parts))
            parts, length = [], 0
        parts.append(part)
        length += len(part) + 1
    specs.append(",".join(parts))
    return specs
