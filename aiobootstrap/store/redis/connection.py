"""Talking to Redis: redis-py, the store's two pools, one deadline per call, every failure mapped once.

Outages: every call runs under one deadline, with redis-py's retries off (a
script must not run twice behind our back) and a blocking pool (a busy pool
waits, it is never "unreachable"). Any failure is
:class:`~aiobootstrap.exceptions.StoreUnavailable`, and :func:`map_exceptions`
is the one place that says so, in one format (as httpcore maps its
transport's errors at one boundary). Connections come back by themselves on
the next call, and a read (never a write) is asked once more when the pooled
connection it drew had been closed by the server.

The feed reader has a connection of its own: its ``XREAD`` blocks for up to a
second, and must neither hold a pooled connection nor wait behind the calls.

Sentinel (``redis+sentinel://``): both pools are redis-py's Sentinel pools
(``Sentinel.master_for``), which ask the Sentinels for the primary whenever
they open a connection, close their connections to a primary that is no
longer named, and turn a ``READONLY`` reply (a demoted primary) into a
broken connection, asked again next time. So while there is no primary a
call is ``StoreUnavailable`` like any outage, and after a failover the next
call lands on the new one; nothing here discovers anything by hand.

One repair: redis-py (8.1) moves the Sentinel that answered to the head of
its list by position, read before the question was asked; two discoveries
at once (every connection a failover breaks asks) can then leave one
Sentinel listed twice and another not at all, never asked again and never
closed (its connections outlive the store). :class:`_Sentinels` moves it by
identity.

Closing waits for the calls under way (each within its deadline) before it
closes anything: a call that is discovering the primary when the Sentinels'
clients are closed goes on to the next Sentinel, and would open a connection
into a pool already closed, left for the garbage collector to find. Then the
two pools go, and the Sentinels' own clients last, since only the pools ask
them.

This is the one module that imports redis-py (the ``redis`` extra): without
it the package still imports, and :func:`redis_missing` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar, cast

from ...exceptions import StoreUnavailable
from ..sentinel_url import is_sentinel_url, parse_sentinel_url

try:  # the `redis` extra
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.asyncio.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool
    from redis.backoff import NoBackoff
    from redis.commands.core import AsyncScript
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import NoScriptError, RedisError, ResponseError
    from redis.exceptions import TimeoutError as RedisTimeout
except ImportError:  # pragma: no cover - the extra is installed for the tests
    aioredis = None  # type: ignore[assignment]

__all__ = [
    "NOT_OPEN",
    "Connection",
    "Operation",
    "map_exceptions",
    "never_ran",
    "reason",
    "redis_missing",
    "reraise_cancellation",
    "unavailable",
]

_T = TypeVar("_T")

Operation = Callable[["aioredis.Redis"], Awaitable[_T]]
"""A call to make with the pooled client."""

NOT_OPEN = "The Redis store is not open."


def redis_missing() -> bool:
    """True when the `redis` extra is not installed."""
    return aioredis is None


def reason(exc: BaseException) -> str:
    """What went wrong, in a few words: the first line of ``exc``'s message, or its type's name."""
    if aioredis is not None and isinstance(exc, MasterNotFoundError):
        # Its message lists every Sentinel's error in repr form: the gist is enough. A refused
        # password is one of them (redis-py counts it a connection error and asks the next).
        if "AuthenticationError" in str(exc):
            return (
                "the Sentinels refused the password they were given (sentinel_password= and "
                "sentinel_username= in the URL's query)"
            )
        return "no Sentinel names a primary now"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.rstrip(".")


def reraise_cancellation() -> None:
    """Raise ``CancelledError`` when this task was asked to stop.

    A cancellation can be lost inside the client library: redis-py (8.1) can
    return a reply, or raise a timeout, from a read cancelled as it
    completed. A loop that goes round on errors or replies must look, or it
    never stops.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def unavailable(where: str, exc: BaseException) -> StoreUnavailable:
    """The :class:`StoreUnavailable` that a Redis error (raised, or a pipeline's reply) stands for."""
    if isinstance(exc, ResponseError):
        return StoreUnavailable(f"Redis at {where} refused the command: {reason(exc)}.")
    return StoreUnavailable(f"Redis at {where} is unreachable: {reason(exc)}.")


@contextlib.contextmanager
def map_exceptions(where: str, timeout: float) -> Iterator[None]:
    """Turn redis-py's errors, the socket's and the deadline's into :class:`StoreUnavailable` (``from`` them).

    ``where`` names the Redis (its URL without the password) and ``timeout``
    the deadline the block runs under. Anything else (a bug, a value redis-py
    cannot encode) goes through as it is.
    """
    try:
        yield
    except (TimeoutError, RedisTimeout) as exc:
        reraise_cancellation()
        raise StoreUnavailable(f"Redis at {where} did not answer within {timeout:g} s.") from exc
    except (RedisError, OSError) as exc:
        reraise_cancellation()
        raise unavailable(where, exc) from exc


def never_ran(reply: Any) -> bool:
    """True for a pipeline's reply saying Redis did not know the script (``NOSCRIPT``): it never ran."""
    return isinstance(reply, NoScriptError)


_CLOSING = 5.0
"""Seconds one client's close may take before the server stops without it."""


class Connection:
    """The store's two pools (its calls', and the feed reader's), and every call made through them."""

    def __init__(
        self,
        url: str,
        *,
        where: str,
        prefix: str,
        timeout: float,
        block_seconds: float,
        max_connections: int,
    ) -> None:
        self._url = url
        self.feed_url = url
        """Where the feed reader connects: ``url`` (a test points it past a proxy that stalls the calls).

        A plain URL only: with a Sentinel URL the reader follows the primary the Sentinels name."""
        self.where = where
        """The Redis, named for messages: its URL without the password."""
        self._prefix = prefix
        self.timeout = timeout
        """The deadline of every call, in seconds."""
        self._block_seconds = block_seconds
        self._max_connections = max_connections
        self.client: aioredis.Redis | None = None
        """The pooled client the calls share; ``None`` while closed."""
        self.feed_client: aioredis.Redis | None = None
        """The feed reader's own client; ``None`` while closed."""
        self._sentinel: Sentinel | None = None
        """The Sentinels both pools ask for the primary (a Sentinel URL); ``None`` otherwise."""
        self._scripts: dict[str, AsyncScript] = {}
        self._calls = 0
        """Calls under way: :meth:`disconnect` waits for them."""
        self._idle = asyncio.Event()
        self._idle.set()

    def connect(self) -> None:
        common: dict[str, Any] = {
            # No retries: a failed call is a 503 at once, and a write script never runs twice.
            "retry": Retry(NoBackoff(), 0),
            "retry_on_error": [],
            "socket_connect_timeout": min(self.timeout, 1.0),
            "health_check_interval": 0,
        }
        calls: dict[str, Any] = {
            "max_connections": self._max_connections,
            "socket_timeout": self.timeout,
            "client_name": f"{self._prefix}.calls",
            **common,
        }
        # The reader's own connection: its XREAD blocks for a second, so its
        # socket waits that long plus the usual timeout before giving up.
        feed: dict[str, Any] = {
            "max_connections": 2,
            "socket_timeout": self.timeout + self._block_seconds,
            "client_name": f"{self._prefix}.feed",
            **common,
        }
        if is_sentinel_url(self._url):
            self._through_sentinel(calls, feed)
            return
        # A blocking pool: with every connection busy a call waits its turn
        # (within its deadline); redis-py's default pool would raise a
        # ConnectionError, and a busy Redis would look unreachable.
        pool = aioredis.BlockingConnectionPool.from_url(self._url, timeout=None, **calls)
        self.client = aioredis.Redis(connection_pool=pool)
        feed_pool = aioredis.ConnectionPool.from_url(self.feed_url, **feed)
        self.feed_client = aioredis.Redis(connection_pool=feed_pool)

    def _through_sentinel(self, calls: dict[str, Any], feed: dict[str, Any]) -> None:
        """Both pools as redis-py's Sentinel pools of the primary the URL's Sentinels name."""
        target = parse_sentinel_url(self._url)
        # redis-py reads the primary's credentials, db and TLS options as from any URL.
        node: dict[str, Any] = dict(aioredis.connection.parse_url(target.node_url))
        node.pop("host", None)
        node.pop("connection_class", None)
        if target.tls:
            node["ssl"] = True
        asking = {
            # Named, so that a Sentinel's CLIENT LIST tells a store's connections from the others'.
            "client_name": f"{self._prefix}.sentinel",
            "socket_timeout": min(self.timeout, 1.0),
            "socket_connect_timeout": min(self.timeout, 1.0),
            "retry": Retry(NoBackoff(), 0),
            "retry_on_error": [],
        }
        if target.tls:
            asking.update({"ssl": True, **{k: v for k, v in node.items() if k.startswith("ssl_")}})
        # The Sentinels' own credentials, never the nodes': redis-py gives the Sentinels only these.
        if target.sentinel_password is not None:
            asking.update(username=target.sentinel_username, password=target.sentinel_password)
        # Through Any: redis-py types Sentinel's constructor from 8.2 on, and not before (an ignore is unused in one).
        sentinels: Any = _Sentinels
        sentinel = self._sentinel = sentinels(list(target.sentinels), sentinel_kwargs=asking, **node)
        self.client = sentinel.master_for(
            target.master, connection_pool_class=_BlockingSentinelPool, timeout=None, **calls
        )
        self.feed_client = sentinel.master_for(target.master, **feed)

    async def disconnect(self) -> None:
        """Close both pools and the Sentinels' clients, once the calls under way have ended (see the top)."""
        clients = (self.client, self.feed_client)
        self.client = self.feed_client = None
        sentinel, self._sentinel = self._sentinel, None
        self._scripts.clear()
        # Each call ends within its deadline; one second more is for its cleanup.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.timeout + 1.0):
                await self._idle.wait()
        # Each close bounded: a pool still connecting to a primary that died (a failover under way) may
        # not end by itself, and a stopping server must stop (a timeout is an Exception, suppressed).
        for client in clients:
            if client is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(_CLOSING):
                        await client.aclose()
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(_CLOSING):
                        await client.connection_pool.disconnect()
        if sentinel is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(_CLOSING):
                    await sentinel.aclose()

    async def call(self, operation: Operation[_T]) -> _T:
        """Run ``operation`` under the deadline; every failure of Redis becomes ``StoreUnavailable``."""
        client = self.client
        if client is None:
            raise StoreUnavailable(NOT_OPEN)
        self._calls += 1
        self._idle.clear()
        try:
            with map_exceptions(self.where, self.timeout):
                async with asyncio.timeout(self.timeout):
                    result = await operation(client)
        finally:
            self._calls -= 1
            if not self._calls:
                self._idle.set()
        reraise_cancellation()
        return result

    async def read(self, operation: Operation[_T]) -> _T:
        """A call that changes nothing (or nothing twice): tried again once on a broken connection.

        A pooled connection the server closed a moment ago (``CLIENT KILL``, an
        idle timeout) fails its next command. A read can simply be asked again
        on a fresh connection; a write is never sent twice (it may have run).
        """
        try:
            return await self.call(operation)
        except StoreUnavailable as exc:
            if not isinstance(exc.__cause__, RedisConnectionError) or self.client is None:
                raise
        return await self.call(operation)

    async def ask_node(self, host: str, port: int, operation: Operation[_T]) -> _T:
        """Run ``operation`` once on another Redis node (a replica) with the calls' credentials and TLS.

        For the checks at open only: a connection of its own, closed after.
        """
        client = self.client
        if client is None:
            raise StoreUnavailable(NOT_OPEN)
        pool = client.connection_pool
        settings = dict(pool.connection_kwargs)
        for name in ("connection_pool", "path", "host", "port"):
            settings.pop(name, None)
        tls = issubclass(pool.connection_class, aioredis.SSLConnection)
        node_pool = aioredis.ConnectionPool(
            connection_class=aioredis.SSLConnection if tls else aioredis.Connection,
            host=host,
            port=port,
            max_connections=1,
            **settings,
        )
        node = aioredis.Redis(connection_pool=node_pool)
        try:
            with map_exceptions(f"{host}:{port}", self.timeout):
                async with asyncio.timeout(self.timeout):
                    return await operation(node)
        finally:
            with contextlib.suppress(Exception):
                await node.aclose()
            with contextlib.suppress(Exception):
                await node_pool.disconnect()

    def script(self, client: aioredis.Redis, script: str) -> AsyncScript:
        """``script`` registered with ``client``: it knows its SHA."""
        registered = self._scripts.get(script)
        if registered is None:
            registered = self._scripts[script] = client.register_script(script)
        return registered

    async def run(self, client: aioredis.Redis, script: str, keys: list[str], args: list[Any]) -> Any:
        """Run ``script`` alone: ``EVALSHA``, loading the script again after ``NOSCRIPT`` (a restarted Redis)."""
        return await self.script(client, script)(keys=keys, args=args, client=client)


if aioredis is not None:

    class _BlockingSentinelPool(SentinelConnectionPool, aioredis.BlockingConnectionPool):
        """redis-py's Sentinel pool, blocking when full, as the plain URL's pool is (see :meth:`Connection.connect`)."""

    class _Sentinels(Sentinel):
        """redis-py's Sentinels, the one that answered moved to the head of the list by identity (see the top)."""

        async def discover_master(self, service_name: str) -> tuple[str, int]:
            """redis-py's ``discover_master``, safe beside other discoveries under way.

            Each Sentinel of a snapshot of the list is asked in turn (another
            discovery may reorder the list meanwhile); the first that names a
            primary in good standing goes to the head, swapped with the
            Sentinel there now, wherever it stands now.
            """
            errors = []
            for sentinel in list(self.sentinels):
                try:
                    # The Sentinels are spoken to in RESP2: a dict by the master's name.
                    masters = cast(dict[str, dict[str, Any]], await sentinel.sentinel_masters())
                except (RedisConnectionError, RedisTimeout) as exc:
                    errors.append(f"{sentinel} - {exc!r}")
                    continue
                state = masters.get(service_name)
                if state and self.check_master_state(state, service_name):
                    listed = self.sentinels
                    at = next(index for index, known in enumerate(listed) if known is sentinel)
                    listed[0], listed[at] = listed[at], listed[0]
                    ip = self._force_master_ip if self._force_master_ip is not None else state["ip"]
                    return ip, state["port"]
            said = f" : {', '.join(errors)}" if errors else ""
            raise MasterNotFoundError(f"No master found for {service_name!r}{said}")
