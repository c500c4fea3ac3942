"""Talking to etcd: aetcd's clients, one per endpoint, one deadline per call, every failure mapped once.

A ``etcd://a:2379,b:2379,c:2379`` URL names members of one cluster. The
connection keeps an aetcd client per member and sends each call to the
*current* one; a call that fails (the member is down, has no leader, or
did not answer in time) makes the next member current, so the next call
goes elsewhere. Reads (which change nothing) are asked of the next member
at once, while the call's deadline lasts; a write is never sent twice
(it may have been applied), it is a ``503`` the client retries.

Every call carries gRPC metadata ``hasleader: true``, as etcd's own Go
client does with ``WithRequireLeader``: a member cut off from its leader
refuses at once instead of waiting, and cancels the watches it serves.

Any failure is :class:`~aiobootstrap.exceptions.StoreUnavailable`, said in
one place (:func:`map_exceptions`), as httpcore maps its transport's errors
at one boundary. aetcd (the ``etcd`` extra) is imported here and in
``messages`` only: without it the package still imports, and
:func:`etcd_missing` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from ...exceptions import StoreUnavailable

try:  # the `etcd` extra
    import aetcd
    import grpc
    from aetcd import exceptions as aetcd_errors
    from aetcd import rpc, watcher
except ImportError:  # pragma: no cover - the extra is installed for the tests
    aetcd = None

__all__ = [
    "Connection",
    "Endpoint",
    "etcd_missing",
    "map_exceptions",
    "reason",
    "token_refused",
    "too_large",
]

logger = logging.getLogger("aiobootstrap")

_T = TypeVar("_T")

REQUIRE_LEADER = ("hasleader", "true")
"""etcd's ``rpctypes.MetadataRequireLeaderKey``: refuse (``no leader``) rather than wait when there is none."""

_CLOSING = 5.0
"""Seconds one client's close may take before the store is closed without it."""

Endpoint = tuple[str, int]


def etcd_missing() -> bool:
    """True when the ``etcd`` extra (aetcd) is not installed."""
    return aetcd is None


def reason(exc: BaseException) -> str:
    """What went wrong, in a few words: the first line of ``exc``'s message, or its type's name."""
    cause: BaseException = exc
    if aetcd is not None and isinstance(exc, aetcd_errors.ClientError) and exc.__cause__ is not None:
        cause = exc.__cause__
    if aetcd is not None and isinstance(cause, grpc.aio.AioRpcError):
        text = cause.details() or cause.code().name
    else:
        text = str(cause).strip() or type(cause).__name__
    return str(text).splitlines()[0].rstrip(".")


@contextlib.contextmanager
def map_exceptions(where: str, timeout: float) -> Iterator[None]:
    """Turn aetcd's, gRPC's and the deadline's errors into :class:`StoreUnavailable` (``from`` them)."""
    try:
        yield
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        # gRPC cancels the calls of a channel that closes under them: for the caller, a failed call.
        raise StoreUnavailable(f"etcd at {where}: the call was cut off (its channel closed).") from exc
    except TimeoutError as exc:
        raise StoreUnavailable(f"etcd at {where} did not answer within {timeout:g} s.") from exc
    except StoreUnavailable:
        raise
    except Exception as exc:
        if aetcd is not None and isinstance(exc, aetcd_errors.ClientError | grpc.RpcError | OSError):
            raise StoreUnavailable(f"etcd at {where} is unreachable: {reason(exc)}.") from exc
        raise


if aetcd is not None:

    class _Client(aetcd.Client):  # type: ignore[misc]  # aetcd has no type hints
        """aetcd's client over a channel of ours: TLS when asked, and ``hasleader`` on every call.

        aetcd 1.0 opens a plain channel and sends metadata only for a token; its ``connect`` is
        replaced by one that builds the same attributes (``channel``, ``metadata``, the stubs and
        the watcher), pinned by ``tests/test_etcd_store.py::test_the_aetcd_client_attributes_we_set``.
        """

        def __init__(self, host: str, port: int, *, tls: grpc.ChannelCredentials | None, **kwargs: Any):
            super().__init__(host, port, **kwargs)
            self._tls = tls

        async def connect(self) -> None:
            if self._connected.is_set():
                return
            target = f"{self._host}:{self._port}"
            options = list(self._options.items())
            if self._tls is not None:
                channel = grpc.aio.secure_channel(target, self._tls, options=options)
            else:
                channel = grpc.aio.insecure_channel(target, options=options)
            try:
                metadata = await self._authenticate(channel)
            except BaseException:
                await channel.close()
                raise
            self.channel = channel
            self.metadata = metadata
            self.kvstub = rpc.KVStub(channel)
            self.clusterstub = rpc.ClusterStub(channel)
            self.leasestub = rpc.LeaseStub(channel)
            self.maintenancestub = rpc.MaintenanceStub(channel)
            self._watcher = watcher.Watcher(rpc.WatchStub(channel), timeout=self._timeout, metadata=metadata)
            self._connected.set()

        async def _authenticate(self, channel: Any) -> tuple[tuple[str, str], ...]:
            """The metadata of every call: ``hasleader``, and a fresh token when the URL names a user."""
            metadata: tuple[tuple[str, str], ...] = (REQUIRE_LEADER,)
            if self._username is not None and self._password is not None:
                stub = rpc.AuthStub(channel)
                request = rpc.AuthenticateRequest(name=self._username, password=self._password)
                reply = await stub.Authenticate(request, timeout=self._timeout)
                metadata += (("token", reply.token),)
            return metadata

        async def reauthenticate(self) -> None:
            """A new token, for the calls and the watches to come (etcd forgets a token unused for
            ``--auth-token-ttl``, 300 s by default)."""
            if self.channel is not None:
                self.metadata = await self._authenticate(self.channel)
                if self._watcher is not None:
                    self._watcher._metadata = self.metadata


def token_refused(exc: BaseException) -> bool:
    """True when etcd refused a call for its token (expired, or the member restarted): it was not applied."""
    seen: BaseException | None = exc
    while seen is not None:
        if aetcd is not None and isinstance(seen, grpc.aio.AioRpcError):
            return "invalid auth token" in (seen.details() or "")
        if "invalid auth token" in str(seen):
            return True
        seen = seen.__cause__
    return False


def too_large(exc: BaseException) -> bool:
    """True when etcd refused a request for its size (past ``--max-request-bytes``, or past gRPC's limit of
    a message): refused whole before it was applied, and refused again however often it is sent."""
    seen: BaseException | None = exc
    while seen is not None:
        if aetcd is not None and isinstance(seen, grpc.aio.AioRpcError):
            details = seen.details() or ""
            return "request is too large" in details or (
                seen.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details
            )
        seen = seen.__cause__
    return False


class Connection:
    """The clients of one cluster's members, the current one, and the deadline of every call."""

    def __init__(
        self,
        endpoints: list[Endpoint],
        *,
        where: str,
        timeout: float,
        username: str | None = None,
        password: str | None = None,
        tls: bool = False,
        cacert: str | None = None,
    ) -> None:
        if aetcd is None:
            raise ImportError("The etcd store needs the etcd extra: pip install 'aiobootstrap[etcd]'.")
        self.where = where
        self.timeout = timeout
        self._endpoints = endpoints
        self._credentials = (username, password)
        self._tls = tls
        self._cacert = cacert
        self._clients: list[Any] = []
        self._channel_credentials: Any = None
        self._closing: set[asyncio.Task[None]] = set()
        self._renewed: set[Any] = set()
        """Clients replaced, closed a deadline later (or at close); closing one twice does nothing."""
        self._current = 0

    def connect(self) -> None:
        """Make the clients (they connect on their first call); an unreadable ``cacert`` is StoreUnavailable."""
        credentials = None
        if self._tls:
            roots = None
            if self._cacert is not None:
                try:
                    with open(self._cacert, "rb") as file:
                        roots = file.read()
                except OSError as exc:
                    raise StoreUnavailable(
                        f"etcd at {self.where}: cannot read the CA file {self._cacert}: {exc.strerror}."
                    ) from exc
            credentials = grpc.ssl_channel_credentials(root_certificates=roots)
        self._channel_credentials = credentials
        self._clients = [self._client_of(endpoint) for endpoint in self._endpoints]

    def _client_of(self, endpoint: Endpoint) -> Any:
        username, password = self._credentials
        return _Client(
            *endpoint,
            tls=self._channel_credentials,
            username=username,
            password=password,
            timeout=self.timeout,
            options={"grpc.enable_retries": 0, "grpc.max_receive_message_length": 64 * 1024 * 1024},
        )

    def renew(self, client: Any) -> None:
        """A new client in place of ``client``, whose watch broke: aetcd's watcher can be left wedged by a
        stream that died under it (its lock held, its queue full), so it is not used again. The old one
        is closed aside, within :data:`_CLOSING` seconds."""
        for index, held in enumerate(self._clients):
            if held is client:
                self._clients[index] = self._client_of(self._endpoints[index])
                self._renewed.add(client)
                # Later: calls still under way on it (each within its deadline) end first.
                task = asyncio.create_task(
                    _close(client, after=self.timeout), name="aiobootstrap etcd client close"
                )
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
                task.add_done_callback(functools.partial(self._closed, client))

    @property
    def opened(self) -> bool:
        return bool(self._clients)

    def client(self) -> Any:
        """The current member's client."""
        if not self._clients:
            raise StoreUnavailable("The etcd store is not open.")
        return self._clients[self._current % len(self._clients)]

    def failed(self, client: Any) -> None:
        """``client``'s member failed a call: the next call goes to the next member."""
        if self._clients and self._clients[self._current % len(self._clients)] is client:
            self._current = (self._current + 1) % len(self._clients)

    async def call(
        self, operation: Callable[[Any], Awaitable[_T]], *, read: bool = False, within: float | None = None
    ) -> _T:
        """Run ``operation`` with the current member's client under the deadline.

        ``read``: it changes nothing, so a failure asks the next member while the deadline lasts.
        ``within``: a shorter deadline than the store's, in seconds (a lease's keepalive).
        """
        loop = asyncio.get_running_loop()
        seconds = self.timeout if within is None else min(within, self.timeout)
        deadline = loop.time() + seconds
        tries = len(self._clients) if read else 1
        reauthenticated = False
        while True:
            client = self.client()
            tries -= 1
            try:
                with map_exceptions(self.where, seconds):
                    async with asyncio.timeout_at(deadline):
                        return await operation(client)
            except StoreUnavailable as exc:
                if token_refused(exc) and not reauthenticated:
                    # Refused before it was applied: a new token, and the same call again (a write too).
                    reauthenticated, tries = True, tries + 1
                    with map_exceptions(self.where, seconds):
                        async with asyncio.timeout_at(deadline):
                            await client.reauthenticate()
                    continue
                if too_large(exc):
                    raise  # the member is well: the request is what it refused
                self.failed(client)
                if tries <= 0 or loop.time() >= deadline:
                    raise

    def _closed(self, client: Any, task: asyncio.Task[None]) -> None:
        self._renewed.discard(client)

    async def close(self) -> None:
        clients, self._clients = self._clients, []
        for task in self._closing:
            task.cancel()  # its client is closed below, now
        for client in [*clients, *self._renewed]:
            await _close(client)
        self._renewed.clear()


async def _close(client: Any, after: float = 0.0) -> None:
    """Close ``client`` ``after`` seconds from now, :data:`_CLOSING` seconds at most, whatever it raises."""
    if after:
        await asyncio.sleep(after)
    with contextlib.suppress(Exception):
        async with asyncio.timeout(_CLOSING):
            await client.close()
