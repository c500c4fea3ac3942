"""The Redis store: any number of replicas share one registry kept in Redis.

How it works
------------
Every key sits under one hash tag, ``{prefix}``, so all of a registry's keys
live in one slot and the scripts stay valid on a cluster:

=================================  ======  ================================================
``{P}:incarnation``                string  the store's incarnation id (the boot id)
``{P}:seq``                        string  changes applied so far, all namespaces together
``{P}:floor``                      string  above every version of a forgotten namespace
``{P}:versions``                   hash    namespace -> its latest version (namespaces holding records)
``{P}:counts``                     hash    namespace -> how many records it holds
``{P}:feed``                       stream  one entry per change: seq, key, version, op; never a value
``{P}:records:NS:KIND:ROLE``       hash    rank -> ``"VERSION REGISTERED_AT JSON"``
=================================  ======  ================================================

Namespaces and kinds hold no colon and the role comes last, so two keys
never share a name. The rank table's length is the rank cap's count, and
``{P}:counts``'s length is the namespace cap's.

Each write (put, delete) is one Lua script, atomic in Redis: get or create the
incarnation, check the limits, take the namespace's next version (a counter
starts at the floor, and a namespace emptied raises the floor to its last
version, as :class:`~aiobootstrap.store.memory.Tables` does), write or delete
the record, keep the counts, bump ``seq`` and ``XADD`` the change to the feed
(``MAXLEN ~``). A write that returned is on the feed.

The feed: one reader task per process blocks in ``XREAD`` on its own
connection, from the last entry id it saw (read once at :meth:`open`, never
``$``), and hands each batch to the listener. Each entry carries ``seq``: an
entry that is not the one after the last seen means entries were trimmed or
the data flushed, and the listener is told to :meth:`resync`. So it is after
the reader reconnects. A watcher polls the incarnation and ``seq`` about once
a second: a new incarnation, or a reader that has not reached the ``seq`` of
the previous poll (stuck, or too far behind), restarts the reader at the
stream's tail and announces a resync. A missed wake needs the feed, the seq
check and the watcher to miss it together.

A put or delete made through this store announces its own change when its
script returns, record and all (a local waiter needs no round trip), and
the listener hears it once: while a write of this process is under way, the
reader holds back the feed's entries for that key, and the write drops its
own entry (or remembers its version, for the reader to drop when it
arrives) and announces the others it held, in version order. So a change
may be heard out of feed order by at most the duration of one local write
to the same key, never lost; a listener that hears a change twice (after
a resync, say) is not confused: a change means "re-check this key".

Coalescing: the reads of one loop turn go out in one pipeline of
``HMGET``s, the writes in one pipeline of ``EVALSHA``s (the client's CPU per
call, not Redis, bounds a replica; a pipeline pays it once).

Outages: every call runs under one deadline, with redis-py's retries off
(a script must not run twice behind our back) and a blocking pool (a busy
pool waits, it is never "unreachable"). Any failure is
:class:`~aiobootstrap.exceptions.StoreUnavailable`; connections come back
by themselves on the next call, and a read (never a write) is asked once
more when the pooled connection it drew had been closed by the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar, cast

from .. import _json
from .._names import KIND_PATTERN, check_name, is_name
from .._ranks import RankSet
from ..exceptions import StoreUnavailable, TooManyNamespaces, TooManyRanks
from .interface import READ_BY_KEY, Change, ChangeListener, Key, Record, Store, StoreLimits, with_member
from .redacted import describe
from .redis_lua import DELETE as _DELETE
from .redis_lua import PUT as _PUT
from .redis_lua import VERSION as _VERSION
from .redis_lua import WATCH as _WATCH

try:  # the `redis` extra
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.commands.core import AsyncScript
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import NoScriptError, RedisError, ResponseError
    from redis.exceptions import TimeoutError as RedisTimeout
except ImportError:  # pragma: no cover - the extra is installed for the tests
    aioredis = None  # type: ignore[assignment]

__all__ = ["RedisStore", "redis_missing"]

logger = logging.getLogger("aiobootstrap")

_T = TypeVar("_T")


_READ_CHUNK = 4096
"""Fields per HMGET when a large rank set is read (``records_in``)."""

_LOCAL_REMEMBERED = 4096
"""Changes of this process the reader may still meet on the feed (to drop them); the oldest go first."""


def redis_missing() -> bool:
    """True when the `redis` extra is not installed."""
    return aioredis is None


async def _stop(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` and wait for it to end (a cancellation of the caller still propagates)."""
    if task is not None:
        task.cancel()
        await asyncio.wait({task})


def _fail(batch: Sequence[tuple[Any, ...]], error: Callable[[], BaseException]) -> None:
    """Fail every future (the last item of each entry) of ``batch`` still waiting."""
    for *_, future in batch:
        if not future.done():
            future.set_exception(error())


def _reraise_cancellation() -> None:
    """Raise ``CancelledError`` when this task was asked to stop.

    A cancellation can be lost inside the client library: redis-py (8.1) can
    return a reply, or raise a timeout, from a read cancelled as it
    completed. A loop that goes round on errors or replies must look, or it
    never stops.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.rstrip(".")


async def _config_get(client: aioredis.Redis, name: str) -> dict[Any, Any]:
    reply: dict[Any, Any] = await client.config_get(name)
    return reply


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisStore(Store):
    """Records in Redis, shared by every replica that names the same Redis and prefix."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "aiobootstrap",
        limits: StoreLimits | None = None,
        timeout: float = 3.0,
        open_timeout: float = 3.0,
        poll_interval: float = 1.0,
        feed_length: int = 10_000,
        max_connections: int = 64,
    ) -> None:
        if aioredis is None:
            raise ImportError("The Redis store needs the redis extra: pip install 'aiobootstrap[redis]'.")
        check_name(prefix, "store prefix")
        self._url = url
        self._description = describe(url)
        self._prefix = prefix
        self._limits = limits if limits is not None else StoreLimits()
        self._timeout = timeout
        self._open_timeout = open_timeout
        self._poll_interval = poll_interval
        self._feed_length = feed_length
        self._max_connections = max_connections

        tag = f"{{{prefix}}}"
        self._incarnation_key = f"{tag}:incarnation"
        self._seq_key = f"{tag}:seq"
        self._floor_key = f"{tag}:floor"
        self._versions_key = f"{tag}:versions"
        self._counts_key = f"{tag}:counts"
        self._feed_key = f"{tag}:feed"
        self._records_prefix = f"{tag}:records:"

        self._client: aioredis.Redis | None = None
        self._feed_client: aioredis.Redis | None = None
        self._listener: ChangeListener | None = None
        self._incarnation = ""
        """What the last reply said; the boot id."""
        self._feed_incarnation = ""
        """The incarnation the reader's position belongs to."""
        self._last_id: bytes | str = "0-0"
        self._last_seq = 0
        self._local: dict[tuple[str, int], None] = {}
        """This process's changes, already announced, that the reader may still meet on the feed."""
        self._in_flight: dict[Key, int] = {}
        """Keys with a write of this process under way, and how many."""
        self._held: dict[Key, list[Change]] = {}
        """The feed's entries for keys in ``_in_flight``, held until the write returns."""
        self._reader: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._check_now = asyncio.Event()
        self._scripts: dict[str, AsyncScript] = {}
        self._batch: list[tuple[str, list[str], asyncio.Future[list[bytes | None]]]] = []
        """Reads asked in this turn of the loop, sent together (see ``_hmget``)."""
        self._writes: list[tuple[str, list[str], list[Any], asyncio.Future[Any]]] = []
        """Write scripts asked in this turn of the loop, sent together (see ``_write``)."""
        self._batches: set[asyncio.Task[None]] = set()

    # -- the interface ----------------------------------------------------

    @property
    def incarnation(self) -> str:
        return self._incarnation

    @property
    def description(self) -> str:
        return self._description

    async def open(self, listener: ChangeListener) -> None:
        """Connect, read the feed's tail, start the reader and the watcher.

        Redis unreachable: retried for ``open_timeout`` seconds, then
        :class:`StoreUnavailable` with one line saying so (the CLI exits 2).
        """
        if self._client is not None:
            raise RuntimeError("The Redis store is already open.")
        self._connect()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._open_timeout
        delay = 0.05
        while True:
            try:
                incarnation, seq, last_id = await self._watch_once()
                break
            except StoreUnavailable as exc:
                if loop.time() + delay >= deadline:
                    await self._disconnect()
                    # The last failure's own words, without the "Redis at ..." its detail repeats.
                    cause = exc.__cause__
                    reason = exc.detail if cause is None else _reason(cause)
                    raise StoreUnavailable(
                        f"Redis at {self._description} is unreachable ({reason}); "
                        f"gave up after {self._open_timeout:g} s."
                    ) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)
        self._listener = listener
        self._incarnation = self._feed_incarnation = incarnation
        self._last_seq, self._last_id = seq, last_id
        await self._warn_if_lossy()
        self._reader = asyncio.create_task(self._read_feed(), name="aiobootstrap redis feed")
        self._watcher = asyncio.create_task(self._watch(), name="aiobootstrap redis watcher")

    async def close(self) -> None:
        # The watcher first: it may be restarting the reader.
        watcher, self._watcher = self._watcher, None
        await _stop(watcher)
        reader, self._reader = self._reader, None
        await _stop(reader)
        # Calls already sent get their answers (within their deadline): a write
        # Redis applies is better acknowledged than reported as failed.
        if self._batches:
            await asyncio.wait(set(self._batches), timeout=self._timeout)
        for batch in list(self._batches):
            await _stop(batch)
        self._listener = None
        await self._disconnect()

    async def put(self, key: Key, value: dict[str, Any]) -> Record:
        record = await self._put(key, value)
        assert record is not None
        return record

    async def set_member(self, key: Key, member: str, *, present: bool) -> Record | None:
        # Read, change, and write only if nobody wrote in between (the script
        # compares versions); a lost race reads again. Atomic across replicas.
        while True:
            current = await self.get(key)
            value = with_member(None if current is None else current.value, member, present=present)
            if value is None:
                return current
            record = await self._put(key, value, expected=-1 if current is None else current.version)
            if record is not None:
                return record

    async def _put(self, key: Key, value: dict[str, Any], expected: int | None = None) -> Record | None:
        """Write ``value``; with ``expected``, only if the record's version is still that (else ``None``)."""
        table = self._table(key)
        registered_at = time.time()
        limits = self._limits
        reply = await self._write(
            key,
            _PUT,
            [*self._write_keys(), table, self._feed_key],
            [
                secrets.token_hex(8),
                key.namespace,
                key.kind,
                key.role,
                key.rank,
                repr(registered_at),
                _json.dumps(value),
                -1 if limits.max_ranks is None else limits.max_ranks,
                -1 if limits.max_namespaces is None else limits.max_namespaces,
                self._feed_length,
                *(() if expected is None else (expected,)),
            ],
        )
        status, held, incarnation = int(reply[0]), int(reply[1]), _text(reply[2])
        self._saw_incarnation(incarnation)
        if status < 0:
            self._release_held(key)
        if status == -3:
            return None
        if status == -2:
            raise TooManyNamespaces(
                f"The server already holds records in {held} namespaces, its limit "
                "(--max-namespaces); a namespace is freed when its last record is deleted."
            )
        if status == -1:
            raise TooManyRanks(
                f"The server already stores {held} distinct ranks, its limit; "
                "unregister one, or give the server a world size or a higher rank limit."
            )
        record = Record(key, value, status, registered_at)
        self._announce_local(Change(key, record.version, record))
        return record

    async def delete(self, key: Key) -> Record | None:
        table = self._table(key)
        reply = await self._write(
            key,
            _DELETE,
            [*self._write_keys(), table, self._feed_key],
            [secrets.token_hex(8), key.namespace, key.kind, key.role, key.rank, self._feed_length],
        )
        version, incarnation = int(reply[0]), _text(reply[1])
        self._saw_incarnation(incarnation)
        if version == 0:
            self._release_held(key)
            return None
        self._announce_local(Change(key, version, deleted=True))
        return self._decode(key, reply[2])

    async def get(self, key: Key) -> Record | None:
        blobs = await self._hmget(self._table(key), [str(key.rank)])
        return None if blobs[0] is None else self._decode(key, blobs[0])

    async def get_many(self, keys: Sequence[Key]) -> list[Record | None]:
        if not keys:
            return []
        # One HMGET per table, all in the same batch: one round trip.
        by_table: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            by_table.setdefault(self._table(key), []).append(index)
        reads = [
            self._hmget(table, [str(keys[index].rank) for index in indexes])
            for table, indexes in by_table.items()
        ]
        replies = await asyncio.gather(*reads)
        found: list[Record | None] = [None] * len(keys)
        for indexes, blobs in zip(by_table.values(), replies, strict=True):
            for index, blob in zip(indexes, blobs, strict=True):
                if blob is not None:
                    found[index] = self._decode(keys[index], blob)
        return found

    async def records(self, namespace: str, kind: str, role: str) -> list[Record]:
        table = self._table(Key(namespace, kind, role, 0))
        blobs = await self._read(lambda client: client.hgetall(table))
        found = [self._decode(Key(namespace, kind, role, int(rank)), blob) for rank, blob in blobs.items()]
        return sorted(found, key=lambda record: record.rank)

    async def records_in(self, namespace: str, kind: str, role: str, ranks: RankSet) -> list[Record]:
        if len(ranks) <= READ_BY_KEY:
            return await super().records_in(namespace, kind, role, ranks)
        # The table's rank fields, then only the records asked for: a batch of
        # a large set never transfers the table's other records.
        table = self._table(Key(namespace, kind, role, 0))
        fields = await self._read(lambda client: client.hkeys(table))
        wanted = sorted(rank for rank in map(int, fields) if rank in ranks)
        found: list[Record] = []
        for start in range(0, len(wanted), _READ_CHUNK):
            chunk = wanted[start : start + _READ_CHUNK]
            blobs = await self._hmget(table, [str(rank) for rank in chunk])
            found.extend(
                self._decode(Key(namespace, kind, role, rank), blob)
                for rank, blob in zip(chunk, blobs, strict=True)
                if blob is not None
            )
        return found

    async def version(self, namespace: str) -> int:
        reply = await self._read(
            lambda client: self._run(client, _VERSION, [self._versions_key, self._floor_key], [namespace])
        )
        return int(reply)

    async def namespaces(self) -> list[str]:
        names = await self._read(lambda client: client.hkeys(self._counts_key))
        return sorted(_text(name) for name in names)

    async def ping(self) -> None:
        await self._read(lambda client: client.ping())

    # -- keys and values --------------------------------------------------

    def _table(self, key: Key) -> str:
        if not is_name(key.namespace):
            raise ValueError(f"Namespace {key.namespace!r} is not a valid namespace name.")
        if not KIND_PATTERN.fullmatch(key.kind):
            raise ValueError(f"Record kind {key.kind!r} is not a valid kind.")
        if not key.role:
            raise ValueError("A role is a non-empty string.")
        return f"{self._records_prefix}{key.namespace}:{key.kind}:{key.role}"

    def _write_keys(self) -> list[str]:
        return [self._incarnation_key, self._seq_key, self._floor_key, self._versions_key, self._counts_key]

    @staticmethod
    def _decode(key: Key, blob: bytes | str) -> Record:
        if isinstance(blob, str):  # never with decode_responses off, which is how we connect
            blob = blob.encode()
        version, registered_at, value = blob.split(b" ", 2)
        return Record(key, _json.loads(value), int(version), float(registered_at))

    # -- talking to Redis -------------------------------------------------

    def _connect(self) -> None:
        common: dict[str, Any] = {
            # No retries: a failed call is a 503 at once, and a write script never runs twice.
            "retry": Retry(NoBackoff(), 0),
            "retry_on_error": [],
            "socket_connect_timeout": min(self._timeout, 1.0),
            "health_check_interval": 0,
        }
        # A blocking pool: with every connection busy a call waits its turn
        # (within its deadline); redis-py's default pool would raise a
        # ConnectionError, and a busy Redis would look unreachable.
        pool = aioredis.BlockingConnectionPool.from_url(
            self._url,
            max_connections=self._max_connections,
            timeout=None,
            socket_timeout=self._timeout,
            client_name=f"{self._prefix}.calls",
            **common,
        )
        self._client = aioredis.Redis(connection_pool=pool)
        # The reader's own connection: its XREAD blocks for a second, so its
        # socket waits that long plus the usual timeout before giving up.
        feed_pool = aioredis.ConnectionPool.from_url(
            self._url,
            max_connections=2,
            socket_timeout=self._timeout + self._block_seconds,
            client_name=f"{self._prefix}.feed",
            **common,
        )
        self._feed_client = aioredis.Redis(connection_pool=feed_pool)

    @property
    def _block_seconds(self) -> float:
        return min(1.0, self._poll_interval)

    async def _disconnect(self) -> None:
        clients = (self._client, self._feed_client)
        self._client = self._feed_client = None
        self._scripts.clear()
        for client in clients:
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.aclose()
                with contextlib.suppress(Exception):
                    await client.connection_pool.disconnect()

    def _hmget(self, table: str, fields: list[str]) -> asyncio.Future[list[bytes | None]]:
        """``HMGET table fields``, sent with every other one asked in this turn of the loop.

        Coalescing: the gets of one loop turn share one pipeline, one round
        trip and one connection. The client's CPU per call, not Redis, bounds
        a replica (see docs/scale-out.md), and a pipeline pays it once.
        """
        future: asyncio.Future[list[bytes | None]] = asyncio.get_running_loop().create_future()
        if self._client is None:
            future.set_exception(StoreUnavailable("The Redis store is not open."))
            return future
        self._batch.append((table, fields, future))
        if len(self._batch) == 1:
            asyncio.get_running_loop().call_soon(self._send_batch)
        return future

    def _send_batch(self) -> None:
        batch, self._batch = self._batch, []
        batch = [item for item in batch if not item[2].done()]  # its caller gave up
        if batch:
            task = asyncio.create_task(self._read_batch(batch), name="aiobootstrap redis reads")
            self._batches.add(task)
            task.add_done_callback(self._batches.discard)

    async def _read_batch(
        self, batch: list[tuple[str, list[str], asyncio.Future[list[bytes | None]]]]
    ) -> None:
        async def read(client: aioredis.Redis) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for table, fields, _ in batch:
                pipe.hmget(table, fields)
            return await pipe.execute()

        try:
            replies = await self._read(read)
        except StoreUnavailable as exc:
            _fail(batch, partial(StoreUnavailable, exc.detail, exc.retry_after))
            return
        except asyncio.CancelledError:  # the store is closing
            _fail(batch, partial(StoreUnavailable, "The Redis store was closed."))
            raise
        for (_, _, future), reply in zip(batch, replies, strict=True):
            if not future.done():
                future.set_result(reply)

    def _send_writes(self) -> None:
        batch, self._writes = self._writes, []
        # A write whose caller gave up before it was sent is not sent: nobody would hear its answer.
        batch = [item for item in batch if not item[3].done()]
        if not batch:
            return
        task = asyncio.create_task(self._write_batch(batch), name="aiobootstrap redis writes")
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)

    async def _write_batch(self, batch: list[tuple[str, list[str], list[Any], asyncio.Future[Any]]]) -> None:
        async def write(client: aioredis.Redis) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for script, keys, args, _ in batch:
                pipe.evalsha(self._script(client, script).sha, len(keys), *keys, *args)
            return await pipe.execute(raise_on_error=False)

        try:
            replies = await self._call(write)
        except StoreUnavailable as exc:
            _fail(batch, partial(StoreUnavailable, exc.detail, exc.retry_after))
            return
        except asyncio.CancelledError:  # the store is closing
            _fail(batch, partial(StoreUnavailable, "The Redis store was closed."))
            raise
        for (script, keys, args, future), reply in zip(batch, replies, strict=True):
            if isinstance(reply, NoScriptError):
                # Never ran (a restarted Redis forgot the script): send it alone, loading it.
                try:
                    reply = await self._call(partial(self._run, script=script, keys=keys, args=args))
                except StoreUnavailable as exc:
                    reply = exc
            elif isinstance(reply, ResponseError):
                reply = StoreUnavailable(
                    f"Redis at {self._description} refused the command: {_reason(reply)}."
                )
            if future.done():
                continue
            if isinstance(reply, BaseException):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    async def _read(self, operation: Callable[[aioredis.Redis], Awaitable[_T]]) -> _T:
        """A call that changes nothing (or nothing twice): tried again once on a broken connection.

        A pooled connection the server closed a moment ago (``CLIENT KILL``, an
        idle timeout) fails its next command. A read can simply be asked again
        on a fresh connection; a write is never sent twice (it may have run).
        """
        try:
            return await self._call(operation)
        except StoreUnavailable as exc:
            if not isinstance(exc.__cause__, RedisConnectionError) or self._client is None:
                raise
        return await self._call(operation)

    async def _call(self, operation: Callable[[aioredis.Redis], Awaitable[_T]]) -> _T:
        """Run ``operation`` under the deadline; every failure becomes ``StoreUnavailable``."""
        client = self._client
        if client is None:
            raise StoreUnavailable("The Redis store is not open.")
        try:
            async with asyncio.timeout(self._timeout):
                result = await operation(client)
        except (TimeoutError, RedisTimeout) as exc:
            _reraise_cancellation()
            raise StoreUnavailable(
                f"Redis at {self._description} did not answer within {self._timeout:g} s."
            ) from exc
        except ResponseError as exc:
            raise StoreUnavailable(
                f"Redis at {self._description} refused the command: {_reason(exc)}."
            ) from exc
        except (RedisError, OSError) as exc:
            _reraise_cancellation()
            raise StoreUnavailable(f"Redis at {self._description} is unreachable: {_reason(exc)}.") from exc
        _reraise_cancellation()
        return result

    def _script(self, client: aioredis.Redis, script: str) -> AsyncScript:
        registered = self._scripts.get(script)
        if registered is None:
            registered = self._scripts[script] = client.register_script(script)
        return registered

    async def _run(self, client: aioredis.Redis, script: str, keys: list[str], args: list[Any]) -> Any:
        # A registered script keeps its SHA and sends EVALSHA, loading the
        # script again after NOSCRIPT (a restarted Redis).
        return await self._script(client, script)(keys=keys, args=args, client=client)

    async def _watch_once(self) -> tuple[str, int, bytes | str]:
        reply = await self._read(
            lambda client: self._run(
                client,
                _WATCH,
                [self._incarnation_key, self._seq_key, self._feed_key],
                [secrets.token_hex(8)],
            )
        )
        return _text(reply[0]), int(reply[1]), reply[2]

    async def _warn_if_lossy(self) -> None:
        settings: dict[str, str] = {}
        try:
            for name in ("appendonly", "appendfsync", "maxmemory-policy"):
                reply = await self._call(partial(_config_get, name=name))
                settings.update((_text(k), _text(v)) for k, v in reply.items())
        except StoreUnavailable as exc:
            logger.info("Cannot check how durable Redis at %s is: %s", self._description, exc.detail)
            return
        risks = []
        if settings.get("appendonly", "yes") != "yes":
            risks.append("appendonly is no, so a restart of Redis loses every registration")
        elif settings.get("appendfsync", "always") != "always":
            risks.append(
                f"appendfsync is {settings['appendfsync']}, so a crash of its machine loses "
                "the last acknowledged registrations"
            )
        policy = settings.get("maxmemory-policy", "noeviction")
        if policy.startswith("allkeys-"):
            risks.append(f"maxmemory-policy is {policy}, so a full Redis evicts registrations")
        if risks:
            logger.warning(
                "Redis at %s can lose acknowledged writes: %s (docs/scale-out.md has the settings that keep them).",
                self._description,
                "; ".join(risks),
            )

    # -- the feed -----------------------------------------------------------

    async def _read_feed(self) -> None:
        delay = 0.05
        failed = False
        block_ms = int(self._block_seconds * 1000)
        while True:
            client = self._feed_client
            if client is None:
                return
            try:
                reply = await client.xread({self._feed_key: self._last_id}, count=1000, block=block_ms)
                # redis-py can return normally from a read that was cancelled
                # as its reply arrived: look, or the reader never stops.
                _reraise_cancellation()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the reader must outlive anything a connection can throw
                _reraise_cancellation()
                if not failed:
                    logger.info(
                        "The change feed of %s broke (%s); reconnecting.", self._description, _reason(exc)
                    )
                failed = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if failed:
                failed, delay = False, 0.05
                logger.info(
                    "The change feed of %s is back; re-checking every waited-for key.", self._description
                )
                self._resync()
            if reply:
                self._deliver(cast(Any, reply)[0][1])

    def _deliver(self, entries: Sequence[tuple[bytes, dict[bytes, bytes]]]) -> None:
        """Announce a batch of ``XREAD`` entries (RESP2, raw bytes)."""
        changes: list[Change] = []
        gap = False
        for entry_id, fields in entries:
            seq = int(fields[b"s"])
            if seq != self._last_seq + 1:
                gap = True
            self._last_seq, self._last_id = seq, entry_id
            namespace = fields[b"n"].decode()
            version = int(fields[b"v"])
            if (namespace, version) in self._local:
                del self._local[(namespace, version)]
                continue
            key = Key(namespace, fields[b"k"].decode(), fields[b"r"].decode(), int(fields[b"i"]))
            change = Change(key, version, deleted=fields[b"o"] == b"del")
            if key in self._in_flight:
                # Perhaps our own write, whose reply is on its way: the write announces it.
                self._held.setdefault(key, []).append(change)
            else:
                changes.append(change)
        if changes:
            self._announce(changes)
        if gap:
            logger.info(
                "The change feed of %s skipped changes; re-checking every waited-for key.", self._description
            )
            self._local.clear()
            self._resync()

    async def _write(self, key: Key, script: str, keys: list[str], args: list[Any]) -> Any:
        """Run a write script, holding back the feed's entries for ``key`` meanwhile (see the top).

        The writes of one loop turn go out in one pipeline of ``EVALSHA``s, as
        the reads do; each script is still atomic on its own, and none is ever
        sent twice, except one Redis never ran (``NOSCRIPT``).
        """
        in_flight = self._in_flight
        in_flight[key] = in_flight.get(key, 0) + 1
        try:
            if self._client is None:
                raise StoreUnavailable("The Redis store is not open.")
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._writes.append((script, keys, args, future))
            if len(self._writes) == 1:
                asyncio.get_running_loop().call_soon(self._send_writes)
            return await future
        except BaseException:
            self._release_held(key)
            raise
        finally:
            if in_flight[key] == 1:
                del in_flight[key]
            else:
                in_flight[key] -= 1

    def _release_held(self, key: Key) -> None:
        held = self._held.pop(key, None)
        if held:
            self._announce(held)

    def _announce_local(self, change: Change) -> None:
        """Announce a write of this process, record and all, with the feed's entries held back for its key."""
        held = self._held.pop(change.key, [])
        own = [entry for entry in held if entry.version == change.version]
        if not own:
            # The entry is still to come: the reader drops it when it does.
            local = self._local
            local[(change.key.namespace, change.version)] = None
            if len(local) > _LOCAL_REMEMBERED:
                del local[next(iter(local))]
        others = [entry for entry in held if entry.version != change.version]
        self._announce(sorted([change, *others], key=lambda entry: entry.version))

    def _announce(self, changes: Sequence[Change]) -> None:
        listener = self._listener
        if listener is None:
            return
        try:
            listener.changed(changes)
        except Exception:
            logger.exception("The change listener failed")

    def _resync(self) -> None:
        listener = self._listener
        if listener is None:
            return
        try:
            listener.resync()
        except Exception:
            logger.exception("The change listener failed to resync")

    def _saw_incarnation(self, incarnation: str) -> None:
        if incarnation != self._incarnation:
            self._incarnation = incarnation
        if incarnation != self._feed_incarnation:
            self._check_now.set()

    async def _watch(self) -> None:
        """The backstop: a new incarnation, or a reader stuck behind, restarts the feed with a resync."""
        behind: int | None = None
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._poll_interval):
                    await self._check_now.wait()
            self._check_now.clear()
            try:
                incarnation, seq, last_id = await self._watch_once()
            except StoreUnavailable:
                _reraise_cancellation()
                behind = None
                continue
            self._incarnation = incarnation
            reason = None
            if incarnation != self._feed_incarnation:
                reason = "its data was lost or flushed (a new incarnation)"
            elif seq < self._last_seq:
                reason = "its change counter went back"
            elif behind is not None and self._last_seq < behind:
                reason = "the feed reader fell behind"
            if reason is None:
                behind = seq if seq > self._last_seq else None
                continue
            behind = None
            log = logger.warning if incarnation != self._feed_incarnation else logger.info
            log("Redis at %s: %s; re-checking every waited-for key.", self._description, reason)
            await self._restart_reader(incarnation, seq, last_id)

    async def _restart_reader(self, incarnation: str, seq: int, last_id: bytes | str) -> None:
        await _stop(self._reader)
        # The tail was read before the listener re-reads: nothing falls between.
        self._feed_incarnation = incarnation
        self._last_seq, self._last_id = seq, last_id
        self._local.clear()
        self._resync()
        self._reader = asyncio.create_task(self._read_feed(), name="aiobootstrap redis feed")
