"""A file store opened on a journal, read back by a fresh one, and a journal line written by hand."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from aiobootstrap._names import DEFAULT_NAMESPACE, DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap.store import Record, StoreLimits
from aiobootstrap.store.file import FileStore

from .stores import Feed


async def open_file(path: Path, limits: StoreLimits | None = None, feed: Feed | None = None) -> FileStore:
    """A file store on ``path``, opened, announcing to ``feed`` (a new one when omitted)."""
    store = FileStore(str(path), limits)
    await store.open(feed if feed is not None else Feed())
    return store


async def reopened(path: Path, namespace: str = DEFAULT_NAMESPACE) -> dict[int, Record]:
    """The transfer-engine infos of ``namespace`` a fresh store reads back from ``path``, by rank."""
    store = await open_file(path)
    try:
        records = await store.records(namespace, TRANSFER_ENGINE_INFO, DEFAULT_ROLE)
        return {record.rank: record for record in records}
    finally:
        await store.close()


def line(entry: dict[str, Any]) -> bytes:
    """A journal line written by hand: the CRC-32 of the compact JSON, in hex, and the JSON."""
    body = json.dumps(entry, separators=(",", ":")).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)
