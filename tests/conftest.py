"""Shared fixtures: the real app behind aiohttp's test client, and helpers that
wait for a condition instead of sleeping."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from aiobootstrap import Registry, ServerConfig, create_app
from aiobootstrap._names import DEFAULT_NAMESPACE, DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.store import Key, LocalStore, MemoryStore, Record, Store

# The `redis_server` fixture: a real redis-server of the test's own (tests/redis_server.py).
pytest_plugins = ["tests.redis_server"]

_PREFIXES = itertools.count()

GUARD = 10.0
"""Seconds any awaited event may take before a test fails: generous, never a measurement."""


async def until(predicate: Callable[[], bool], guard: float = GUARD) -> None:
    """Yield to the loop until ``predicate()`` holds (fail after ``guard`` seconds)."""
    async with asyncio.timeout(guard):
        # Polls a condition the code under test exposes, with no delay: the
        # loop runs the other tasks at every turn. (An Event would need a hook
        # in the code under test for each condition.)
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0)


def registration(
    rank: Any, session_id: Any = "10.0.0.7:18000", weights: Any = None, key: str = "rank"
) -> dict[str, Any]:
    return {
        key: rank,
        "transfer_engine_info": {
            "session_id": session_id,
            "weights_info_dict": {"w": [1, 2, 3]} if weights is None else weights,
        },
    }


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig()


@pytest.fixture(params=["memory", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    """The HTTP suite (every test using ``client``) runs over the memory store and over Redis."""
    return str(request.param)


@pytest.fixture
async def client(
    aiohttp_client: Any, config: ServerConfig, store_kind: str, request: pytest.FixtureRequest
) -> TestClient[web.Request, web.Application]:
    if store_kind == "redis" and config.store_url == "memory:":
        redis = request.getfixturevalue("shared_redis")
        config = dataclasses.replace(config, store=redis.url, store_prefix=f"t{next(_PREFIXES)}")
    app = create_app(config)
    # As BootstrapServer does: a client that hangs up stops its parked wait.
    test_client: TestClient[web.Request, web.Application] = await aiohttp_client(
        app, server_kwargs={"handler_cancellation": True}
    )
    return test_client


@pytest.fixture
def registry(client: TestClient[web.Request, web.Application]) -> Registry:
    return client.app[REGISTRY]


def info_key(rank: int, namespace: str = DEFAULT_NAMESPACE) -> Key:
    """The key of ``rank``'s transfer-engine info."""
    return Key(namespace, TRANSFER_ENGINE_INFO, DEFAULT_ROLE, rank)


async def register_in(
    registry: Registry, rank: int, session_id: str = "s", weights: dict[str, Any] | None = None
) -> Record:
    """Register ``rank`` in the default namespace straight through the registry, without HTTP."""
    value = {"session_id": session_id, "weights_info_dict": {} if weights is None else weights}
    return await registry.register(info_key(rank), value)


async def stored(registry: Registry, rank: int, namespace: str = DEFAULT_NAMESPACE) -> Record | None:
    """What the store holds for ``rank``'s transfer-engine info."""
    return await registry.get(info_key(rank, namespace))


async def stored_count(registry: Registry, namespace: str = DEFAULT_NAMESPACE) -> int:
    """How many ranks' transfer-engine info the store holds in ``namespace``."""
    return len(await registry.store.records(namespace, TRANSFER_ENGINE_INFO, DEFAULT_ROLE))


async def open_registry(store: Store | None = None, **options: Any) -> Registry:
    """A registry over ``store`` (a new memory store when omitted), listening to its feed."""
    store = store if store is not None else MemoryStore()
    registry = Registry(store, **options)
    await store.open(registry)
    return registry


def peek(registry: Registry, rank: int, namespace: str = DEFAULT_NAMESPACE) -> Record | None:
    """What an in-process store holds for ``rank``, read without awaiting (for ``until``)."""
    store = registry.store
    assert isinstance(store, LocalStore)
    return store.peek(info_key(rank, namespace))
