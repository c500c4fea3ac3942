"""Reads of single keys, batched: the keys asked for in one turn of the loop go in one etcd round trip.

Every get (a waiter's re-check, a page's read, a client's GET) reads one
record key. Sent alone, each is a consensus read of its own; here the keys
asked for while the loop turns are read together, at one revision, with
``P/boot`` beside them (``feed``'s boot check), :data:`~.messages.MAX_OPS`
less one at most a round trip. A failure is every waiting read's.
"""

from __future__ import annotations

import asyncio

from . import messages as m
from .connection import Connection
from .feed import Feed
from .keys import Keys

__all__ = ["Reads"]


class Reads:
    """The batcher of single-key reads (see the top)."""

    def __init__(self, connection: Connection, keys: Keys, feed: Feed) -> None:
        self._connection = connection
        self._keys = keys
        self._feed = feed
        self._waiting: dict[bytes, list[asyncio.Future[m.Found | None]]] = {}
        self._scheduled = False
        self.tasks: set[asyncio.Task[None]] = set()

    async def get(self, key: bytes) -> m.Found | None:
        """``key``'s value and revision, or ``None`` when it does not exist (``StoreUnavailable``)."""
        return await self.ask(key)

    def ask(self, key: bytes) -> asyncio.Future[m.Found | None]:
        """A future of :meth:`get`'s answer: many keys asked at once cost a future each, not a task each."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[m.Found | None] = loop.create_future()
        self._waiting.setdefault(key, []).append(future)
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self._scheduled = False
        while self._waiting:
            keys = list(self._waiting)[: m.MAX_OPS - 1]
            batch = {key: self._waiting.pop(key) for key in keys}
            task = asyncio.create_task(self._read(batch), name="aiobootstrap etcd reads")
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _read(self, batch: dict[bytes, list[asyncio.Future[m.Found | None]]]) -> None:
        ops = [m.get(self._keys.boot), *(m.get(key) for key in batch)]
        try:
            reply = await self._connection.call(m.txn((), ops), read=True)
            boot = reply.reads[0]
            self._feed.check_boot(boot[0].value if boot else None)
        except asyncio.CancelledError:
            for futures in batch.values():
                for future in futures:
                    future.cancel()
            raise
        except Exception as exc:
            for futures in batch.values():
                for future in futures:
                    if not future.done():
                        future.set_exception(exc)
            return
        for futures, found in zip(batch.values(), reply.reads[1:], strict=True):
            for future in futures:
                if not future.done():
                    future.set_result(found[0] if found else None)
