"""Rank reads coalesced per table: every read of a table asked before the read batch goes out is one ``HMGET``.

A replica's CPU per get is the client library's, per command (packing it,
reading its reply under a deadline of its own), not Redis's. So the gets
waiting for the read batcher's next pipeline do not each add a command:
the first read of a table queues one stage, and the stage, run as the
pipeline is built, takes every field asked of that table until then (each
field once) into one ``HMGET``. Reads asked after that start the next
table group. The reply is shared out to each read by field.

Decoding: a rank's blob (``keys``) is decoded into a :class:`Record` once;
while Redis keeps answering the same bytes for that rank, the same record
is returned (bytes equal, record equal), so a hot rank costs no JSON work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..records import Key, Record
from .keys import decode

if TYPE_CHECKING:
    from redis.asyncio.client import Pipeline

    from .batcher import Batcher

__all__ = ["RankReads"]

_DECODED_BYTES = 32 << 20
"""The decoded records' blobs remembered, in bytes; past that the memory starts over."""


class _Group:
    """The fields asked of one table for one ``HMGET``, and who asked."""

    __slots__ = ("asked", "fields", "sent")

    def __init__(self) -> None:
        self.fields: dict[str, int] = {}
        """Each field asked, once, at its place in the command."""
        self.asked: list[tuple[list[int], asyncio.Future[list[bytes | None]]]] = []
        self.sent = False

    def settle(self, done: asyncio.Future[Any]) -> None:
        error = None if done.cancelled() else done.exception()
        blobs: list[bytes | None] = [] if error is not None or done.cancelled() else done.result()
        for places, future in self.asked:
            if future.done():
                continue  # its caller gave up
            if done.cancelled():
                future.cancel()
            elif error is not None:
                future.set_exception(error)
            else:
                future.set_result([blobs[place] for place in places])


class RankReads:
    """``HMGET``s sent through ``batcher``, one per table and pipeline; records decoded once per blob."""

    def __init__(self, batcher: Batcher) -> None:
        self._batcher = batcher
        self._open: dict[str, _Group] = {}
        """The group of each table still taking fields (its stage not yet run)."""
        self._decoded: dict[Key, tuple[bytes, Record]] = {}
        self._decoded_bytes = 0

    def fetch(self, table: str, fields: Sequence[str]) -> asyncio.Future[list[bytes | None]]:
        """The blobs of ``fields`` of ``table``, read with every other field of it asked meanwhile."""
        future: asyncio.Future[list[bytes | None]] = asyncio.get_running_loop().create_future()
        group = self._open.get(table)
        if group is None:
            group = self._open[table] = _Group()
            queued = self._batcher.submit(lambda client, pipe: self._stage(table, group, pipe))
            group.asked.append(([group.fields.setdefault(f, len(group.fields)) for f in fields], future))
            queued.add_done_callback(lambda done: self._settle(table, group, done))
            return future
        group.asked.append(([group.fields.setdefault(f, len(group.fields)) for f in fields], future))
        return future

    def _stage(self, table: str, group: _Group, pipe: Pipeline) -> None:
        # Run as the pipeline is built (once more if a broken connection makes the batch go again).
        if self._open.get(table) is group:
            del self._open[table]
        group.sent = True
        pipe.hmget(table, list(group.fields))

    def _settle(self, table: str, group: _Group, done: asyncio.Future[Any]) -> None:
        if self._open.get(table) is group:
            del self._open[table]  # the batch failed before its stage ran
        group.settle(done)

    def record(self, key: Key, blob: bytes) -> Record:
        """The record of ``blob``, decoded once while the rank's bytes stay the same."""
        seen = self._decoded.get(key)
        if seen is not None and seen[0] == blob:
            return seen[1]
        record = decode(key, blob)
        if self._decoded_bytes + len(blob) > _DECODED_BYTES:
            self._decoded.clear()
            self._decoded_bytes = 0
        self._decoded[key] = (blob, record)
        self._decoded_bytes += len(blob)  # a replaced blob's bytes stay counted until the next start over
        return record
