"""Puts coalesced per write batch: every put asked before the write batch goes out is one ``EVALSHA``.

A put's cost in a replica is mostly the client library packing its
command, argument by argument: alone, a put is one script call of 26
arguments (the ten keys it touches, its own fields, the store's limits).
So the puts waiting for the write batcher's next pipeline share one call of
``lua.PUTS``: the first put queues one stage, and the stage, run as the
pipeline is built, takes every put asked until then. The shared keys and
the limits go once, each put adds its ten fields, and Redis runs the puts
in order, each as atomic as alone. Puts asked after that start the next
group.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Any

from ..limits import StoreLimits
from . import lua
from .keys import Keys, text

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline

    from .batcher import Batcher
    from .connection import Connection

__all__ = ["Puts"]

PutReply = tuple[int, int, str]
"""A put's status (its version, or a refusal), the count a refusal names, and the incarnation."""


def _limit(limit: int | None) -> int:
    return -1 if limit is None else limit


class _Group:
    """The puts of one ``PUTS`` call: their tables, their arguments, who asked."""

    __slots__ = ("args", "futures", "keys", "tables")

    def __init__(self, keys: Keys, head: list[Any]) -> None:
        self.keys: list[str] = [
            keys.incarnation,
            keys.seq,
            keys.floor,
            keys.versions,
            keys.counts,
            keys.feed,
            keys.roles,
            keys.leases,
            keys.owners,
        ]
        self.tables: dict[str, int] = {}
        """Each table written, at its place in ``KEYS`` (from 1, as Lua counts)."""
        self.args: list[Any] = head
        self.futures: list[asyncio.Future[PutReply]] = []

    def add(self, table: str, fields: list[Any]) -> asyncio.Future[PutReply]:
        place = self.tables.get(table)
        if place is None:
            self.keys.append(table)
            place = self.tables[table] = len(self.keys)
        self.args.append(place)
        self.args.extend(fields)
        future: asyncio.Future[PutReply] = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        return future

    def settle(self, done: asyncio.Future[Any]) -> None:
        error = None if done.cancelled() else done.exception()
        reply: list[Any] = [] if error is not None or done.cancelled() else done.result()
        for index, future in enumerate(self.futures):
            if future.done():
                continue
            if done.cancelled():
                future.cancel()
            elif error is not None:
                future.set_exception(error)
            else:
                future.set_result((int(reply[1 + 2 * index]), int(reply[2 + 2 * index]), text(reply[0])))


class Puts:
    """Puts sent through ``batcher``, one ``PUTS`` call per write batch."""

    def __init__(
        self, connection: Connection, batcher: Batcher, keys: Keys, limits: StoreLimits, feed_length: int
    ) -> None:
        self._connection = connection
        self._batcher = batcher
        self._keys = keys
        self._limits = limits
        self._feed_length = feed_length
        self._open: _Group | None = None
        """The group still taking puts (its stage not yet run)."""

    def put(self, table: str, fields: list[Any]) -> asyncio.Future[PutReply]:
        """Queue one put: ``fields`` are its ``lua.PUT_ARGS`` arguments after the table's."""
        group = self._open
        if group is not None:
            return group.add(table, fields)
        limits = self._limits
        head = [
            secrets.token_hex(8),
            _limit(limits.max_ranks),
            _limit(limits.max_namespaces),
            self._feed_length,
            _limit(limits.max_roles),
        ]
        group = self._open = _Group(self._keys, head)
        future = group.add(table, fields)
        connection = self._connection

        def stage(client: aioredis.Redis, pipe: Pipeline) -> None:
            if self._open is group:
                self._open = None
            pipe.evalsha(connection.script(client, lua.PUTS).sha, len(group.keys), *group.keys, *group.args)

        def settle(done: asyncio.Future[Any]) -> None:
            if self._open is group:
                self._open = None  # the batch failed before its stage ran
            group.settle(done)

        self._batcher.submit(
            stage, alone=lambda: self._batcher.run_alone(lua.PUTS, group.keys, group.args)
        ).add_done_callback(settle)
        return future
