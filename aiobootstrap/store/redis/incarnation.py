"""Reads that know which incarnation answered them: no "absent" under a boot id whose data it is not.

A read that finds no record proves the rank absent only in the incarnation
of the data it read. After a failover to a replica that held no data (or a
``FLUSHALL``), the first reads land on a store without this registry's
incarnation, or with a newer one, well before the feed's watcher (about a
second) would notice; answered as they are, they would be ``404``s under
the old boot id, saying "unregistered" of ranks that never were. So each
read pipeline ends with ``GET {P}:incarnation``, on the same connection as
its reads (the same node, just after them):

- the incarnation the store knows: nothing to do;
- another one: the store takes it at once (:meth:`Feed.saw`, which also
  wakes the watcher to restart the feed and re-check every waited-for key),
  so the reply names the incarnation it read;
- none: the data is gone and no write or watcher has made a new incarnation
  yet. The reads are :class:`StoreUnavailable` (a ``503``, retried), the
  watcher is woken, and makes one within milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...exceptions import StoreUnavailable
from .connection import Connection, unavailable
from .feed import Feed
from .keys import text

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline

__all__ = ["Incarnations"]


class Incarnations:
    """Checks the incarnation each read pipeline ends with (see the top)."""

    def __init__(self, connection: Connection, key: str, feed: Feed) -> None:
        self._connection = connection
        self._key = key
        self._feed = feed

    def stage(self, pipe: Pipeline) -> None:
        """The pipeline's last command: the incarnation of the node it runs on."""
        pipe.get(self._key)

    def verdict(self, reply: Any) -> BaseException | None:
        """What the ``GET``'s ``reply`` means for the reads before it: ``None`` when they stand."""
        if isinstance(reply, BaseException):
            return unavailable(self._connection.where, reply)
        if reply is None:
            self._feed.lost()
            return StoreUnavailable(
                f"Redis at {self._connection.where} holds none of this registry's data (a failover to a "
                "replica without it, or a flush): a new boot id is being made; retry."
            )
        incarnation = text(reply)
        if incarnation != self._feed.incarnation:
            self._feed.saw(incarnation)
        return None

    async def read(self, command: Callable[[Pipeline], object]) -> Any:
        """One read of its own (``command`` adds it to a pipeline), checked as a read batch is."""

        async def checked(client: aioredis.Redis) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            command(pipe)
            self.stage(pipe)
            return await pipe.execute(raise_on_error=False)

        reply, incarnation = await self._connection.read(checked)
        wrong = self.verdict(incarnation)
        if wrong is None and isinstance(reply, BaseException):
            wrong = unavailable(self._connection.where, reply)
        if wrong is not None:
            raise wrong
        return reply
