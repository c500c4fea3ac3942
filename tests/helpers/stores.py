"""Every store a contract test runs against (``FLAVORS``), the fixtures that open one per flavor, a
change listener that records what it hears, and values for a store to keep.

The fixtures (``flavor``, ``feed``, ``open_store``) are imported by name into the modules whose
tests run on every store flavor.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aiobootstrap._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap.store import Change, Key, MemoryStore, Record, Store, StoreLimits
from aiobootstrap.store.file import FileStore

from .waits import until


class Feed:
    """A change listener that records everything it hears, in order."""

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.resyncs = 0

    def changed(self, changes: Sequence[Change]) -> None:
        self.changes.extend(changes)

    def resync(self) -> None:
        self.resyncs += 1


def info(session_id: str = "s", weights: dict[str, Any] | None = None) -> dict[str, Any]:
    """A transfer-engine info value, as the server stores one."""
    return {"session_id": session_id, "weights_info_dict": {} if weights is None else weights}


def key(
    rank: int, namespace: str = "default", kind: str = TRANSFER_ENGINE_INFO, role: str = DEFAULT_ROLE
) -> Key:
    return Key(namespace, kind, role, rank)


@dataclass(frozen=True)
class Flavor:
    """How to make one kind of store for a test, and what its feed carries."""

    make: Callable[[pytest.FixtureRequest, StoreLimits], Store]
    """An unopened store with ``limits``; it may ask ``request`` for fixtures (a directory, a server)."""
    feed_carries_records: bool = True
    """Whether a put's change carries its record (a feed between processes may carry only the key)."""


def _memory(request: pytest.FixtureRequest, limits: StoreLimits) -> Store:
    return MemoryStore(limits)


def _file(request: pytest.FixtureRequest, limits: StoreLimits) -> Store:
    tmp_path: Path = request.getfixturevalue("tmp_path")
    return FileStore(str(tmp_path / "state.journal"), limits)


def _redis(request: pytest.FixtureRequest, limits: StoreLimits) -> Store:
    from aiobootstrap.store.redis import RedisStore

    server = request.getfixturevalue("redis_server")
    return RedisStore(server.url, limits=limits)


def _etcd(request: pytest.FixtureRequest, limits: StoreLimits) -> Store:
    from aiobootstrap.store.etcd import EtcdStore
    from testbed.etcd_server import unique_prefix

    cluster = request.getfixturevalue("shared_etcd")
    # One etcd for the worker's whole session, a prefix of the test's own: a fresh store without a
    # member started for each test.
    prefix = request.node.__dict__.setdefault("etcd_prefix", unique_prefix())
    return EtcdStore(cluster.url(prefix), limits=limits)


FLAVORS = {
    "memory": Flavor(_memory),
    "file": Flavor(_file),
    "redis": Flavor(_redis),
    "etcd": Flavor(_etcd, feed_carries_records=False),
}


OpenStore = Callable[..., Awaitable[Store]]


@pytest.fixture(params=sorted(FLAVORS))
def flavor(request: pytest.FixtureRequest) -> Flavor:
    return FLAVORS[request.param]


@pytest.fixture
def feed() -> Feed:
    return Feed()


@pytest.fixture
async def open_store(request: pytest.FixtureRequest, flavor: Flavor, feed: Feed) -> AsyncIterator[OpenStore]:
    """Opens the flavor's store with the given limits, announcing to ``feed``; closes it after the test."""
    opened: list[Store] = []

    async def open_(limits: StoreLimits | None = None) -> Store:
        store = flavor.make(request, limits if limits is not None else StoreLimits())
        await store.open(feed)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        await store.close()


@pytest.fixture
async def store(open_store: OpenStore) -> Store:
    """An opened store without limits."""
    return await open_store()


async def heard(feed: Feed, count: int) -> list[Change]:
    """The feed's changes once it has heard ``count`` of them (a feed between processes may lag the write)."""
    await until(lambda: len(feed.changes) >= count)
    return feed.changes


async def put_all(store: Store, keys: Sequence[Key]) -> tuple[list[Record], list[BaseException]]:
    """Put every key at once; the records stored and the errors raised."""
    results = await asyncio.gather(*(store.put(k, info(f"s{k.rank}")) for k in keys), return_exceptions=True)
    records = [result for result in results if isinstance(result, Record)]
    errors = [result for result in results if isinstance(result, BaseException)]
    return records, errors


ODD_VALUE: dict[str, Any] = {
    "session_id": 'caf\u00e9 \u4e2d\u6587 \U0001f680 \u2028 tab\t newline\n quote" backslash\\ nul\x00',
    "weights_info_dict": {
        "big": 2**63 - 1,
        "small": -(2**63),
        "zero": 0,
        "float": 0.1,
        "tiny": 5e-324,
        "huge": 1.7976931348623157e308,
        "whole float": 2.0,
        "flags": [True, False, None],
        "empty": {"list": [], "dict": {}, "string": ""},
        "nested": {"a": [{"b": [{"c": [1, [2, [3, [4]]]]}]}]},
        "\u00fcnicode key \U0001f511": "\u0301combining",
    },
}


def exact(value: Any) -> str:
    """``value`` written out so that 1, 1.0 and True differ, and key order shows."""
    return json.dumps(value, ensure_ascii=True)
