"""One pipeline per loop turn: the commands asked in one turn of the event loop go out together.

Coalescing: the client's CPU per call, not Redis, bounds a replica (see
docs/scale-out.md), and a pipeline pays it once. The gets of one loop turn
share one pipeline of ``HMGET``s, one round trip and one connection; the
writes share one pipeline of ``EVALSHA``s, each script still atomic on its
own. Reads and writes are two instances of this one :class:`Batcher`, told
how to send: a read batch with :meth:`Connection.read` (asked once more on a
connection the server had closed), a write batch with :meth:`Connection.call`
(never sent twice).

Each command gets its own answer. The pipeline is sent with
``raise_on_error=False``, so a command Redis refuses fails alone; a script
Redis never ran (``NOSCRIPT``: a restarted Redis forgot it) is loaded and
queued once more, and is the only command ever sent twice.

Replicas (``--store-min-replicas N``): a write batch ends with ``WAIT N
ms``, on the same connection as its scripts, so it answers once N replicas
hold every write before it. Fewer in time, and every command of the batch
is :class:`StoreUnavailable`: its write ran on the primary, but a failover
now could lose it, and nobody may be told it is kept.

A read batch ends with a ``check`` (``incarnation``): the incarnation of the
node that answered, whose verdict can fail every read of the batch. Whatever the
batch as a whole raises (Redis unreachable, a deadline, a bug) every command
of the batch hears it: a batch task never ends with a future unresolved, so
one bad request cannot hang the others sent with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ...exceptions import StoreUnavailable
from .connection import NOT_OPEN, Connection, Operation, never_ran, unavailable

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline

__all__ = ["Batcher", "Stage"]

Stage = Callable[["aioredis.Redis", "Pipeline"], object]
"""Adds one command to a pipeline (given the client, which a script registers with)."""

Send = Callable[[Operation[list[Any]]], Awaitable[list[Any]]]
"""How a batch goes out: :meth:`Connection.read` or :meth:`Connection.call`."""

_CLOSED = "The Redis store was closed."


class Check(Protocol):
    """A command every batch ends with, and what its reply means for the batch."""

    def stage(self, pipe: Pipeline) -> None: ...

    def verdict(self, reply: Any) -> BaseException | None:
        """``None``: the batch's replies stand; an error: every command of the batch hears it."""


@dataclass(slots=True)
class _Command:
    stage: Stage
    future: asyncio.Future[Any]
    alone: Callable[[], Awaitable[Any]] | None
    """How to send the command by itself when Redis never ran it (``NOSCRIPT``); ``None``: it cannot say so."""


class Batcher:
    """The commands asked in this turn of the loop, sent together in one pipeline, each answered on its own."""

    def __init__(
        self,
        connection: Connection,
        send: Send,
        *,
        name: str,
        in_flight: int | None = None,
        replicas: int = 0,
        replica_wait: float = 1.0,
        check: Check | None = None,
    ) -> None:
        """``replicas``: how many Redis replicas must hold a batch's writes (``WAIT``), for ``replica_wait`` s;
        ``check``: the command every batch ends with (see the top)."""
        self._connection = connection
        self._send = send
        self._name = name
        self._in_flight = in_flight
        """At most this many batches out at once (``None``: no limit); the commands asked meanwhile wait
        for one to return and go out together: under load, fewer and larger pipelines."""
        self._replicas = replicas
        self._replica_wait = replica_wait
        self._check = check
        self._queue: list[_Command] = []
        self._scheduled = False
        self.tasks: set[asyncio.Task[None]] = set()
        """The batches sent and not yet answered."""

    def script(self, script: str, keys: list[str], args: list[Any]) -> asyncio.Future[Any]:
        """Queue ``script`` (``EVALSHA``), loaded and queued once more if Redis never ran it."""
        connection = self._connection

        def stage(client: aioredis.Redis, pipe: Pipeline) -> None:
            pipe.evalsha(connection.script(client, script).sha, len(keys), *keys, *args)

        return self.submit(stage, alone=lambda: self.run_alone(script, keys, args))

    async def run_alone(self, script: str, keys: list[str], args: list[Any]) -> Any:
        """Run ``script`` by itself, loaded first, when Redis never ran it in a batch (``NOSCRIPT``).

        Not queued again: with a batch in flight the queue waits for this one, which is waiting here.
        Its ``WAIT`` rides in the same pipeline, as it must: ``WAIT`` counts this connection's writes.
        """
        connection = self._connection

        async def load_and_run(client: aioredis.Redis) -> list[Any]:
            sha = await client.script_load(script)
            pipe = client.pipeline(transaction=False)
            pipe.evalsha(sha, len(keys), *keys, *args)
            if self._replicas:
                pipe.execute_command("WAIT", self._replicas, int(self._replica_wait * 1000))
            return await pipe.execute(raise_on_error=False)

        replies = await connection.call(load_and_run)
        short = self._short_of_replicas(replies.pop()) if self._replicas else None
        reply = replies[0]
        if isinstance(reply, BaseException):
            raise unavailable(connection.where, reply)
        if short is not None:
            raise short
        return reply

    def submit(
        self, stage: Stage, *, alone: Callable[[], Awaitable[Any]] | None = None
    ) -> asyncio.Future[Any]:
        """Queue one command for this loop turn's pipeline; its reply (or error) comes in the future."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if self._connection.client is None:
            future.set_exception(StoreUnavailable(NOT_OPEN))
            return future
        self._queue.append(_Command(stage, future, alone))
        self._schedule()
        return future

    def _schedule(self) -> None:
        if self._scheduled or not self._queue:
            return
        if self._in_flight is not None and len(self.tasks) >= self._in_flight:
            return  # a batch returning sends the queue (``_sent``)
        self._scheduled = True
        asyncio.get_running_loop().call_soon(self._send_queued)

    def _send_queued(self) -> None:
        self._scheduled = False
        # A command whose caller gave up before it was sent is not sent: nobody would hear its answer.
        batch = [command for command in self._queue if not command.future.done()]
        self._queue = []
        if batch:
            task = asyncio.create_task(self._answer(batch), name=self._name)
            self.tasks.add(task)
            task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self._schedule()

    async def _answer(self, batch: list[_Command]) -> None:
        try:
            await self._send_and_settle(batch)
        except asyncio.CancelledError:  # the store is closing
            _fail(batch, StoreUnavailable(_CLOSED))
            raise
        except BaseException as exc:  # whatever it is, every caller of the batch hears it
            _fail(batch, exc)
            if not isinstance(exc, Exception):
                raise

    async def _send_and_settle(self, batch: list[_Command]) -> None:
        async def pipeline(client: aioredis.Redis) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for command in batch:
                command.stage(client, pipe)
            if self._replicas:
                pipe.execute_command("WAIT", self._replicas, int(self._replica_wait * 1000))
            if self._check is not None:
                self._check.stage(pipe)
            return await pipe.execute(raise_on_error=False)

        replies = await self._send(pipeline)
        where = self._connection.where
        wrong = self._check.verdict(replies.pop()) if self._check is not None else None
        short = self._short_of_replicas(replies.pop()) if self._replicas else None
        for command, reply in zip(batch, replies, strict=True):
            if wrong is not None:
                reply = wrong
            elif short is not None and not isinstance(reply, BaseException):
                reply = short
            elif isinstance(reply, BaseException):
                if command.alone is not None and never_ran(reply):
                    try:
                        reply = await command.alone()
                    except Exception as exc:
                        reply = exc
                else:
                    reply = unavailable(where, reply)
            future = command.future
            if future.done():
                continue
            if isinstance(reply, BaseException):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    def _short_of_replicas(self, reply: Any) -> StoreUnavailable | None:
        """What ``WAIT``'s ``reply`` means for the batch: ``None`` when enough replicas hold it."""
        if isinstance(reply, BaseException):
            return unavailable(self._connection.where, reply)
        if int(reply) >= self._replicas:
            return None
        return StoreUnavailable(
            f"Redis at {self._connection.where}: the write reached {int(reply)} of the {self._replicas} "
            f"replicas it must (--store-min-replicas) within {self._replica_wait:g} s, so it may or may not "
            "be kept; a retry is safe."
        )


def _fail(batch: list[_Command], error: BaseException) -> None:
    """Fail every command of ``batch`` still waiting with ``error``."""
    for command in batch:
        if not command.future.done():
            command.future.set_exception(error)
