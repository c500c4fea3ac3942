"""Shared fixtures: the real app behind aiohttp's test client, over each store.

Fixtures and hooks only: the helpers test modules share are in ``tests/helpers/``."""

from __future__ import annotations

import dataclasses
import itertools
import os
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from aiobootstrap import Registry, ServerConfig, create_app
from aiobootstrap.server.app import REGISTRY

# The `redis_server` fixture: a real redis-server of the test's own (tests/redis_server.py, over testbed/); the etcd
# fixtures (`shared_etcd`, `etcd_cluster`, `etcd_member`): real etcd members (tests/helpers/etcd_server.py).
pytest_plugins = ["tests.redis_server", "tests.helpers.etcd_server"]

_PREFIXES = itertools.count()


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig()


HTTP_STORES = ["memory", "redis", *(["etcd"] if os.environ.get("AIOBOOTSTRAP_TEST_HTTP_OVER_ETCD") else [])]
"""The stores the HTTP suite runs over. Over etcd too with ``AIOBOOTSTRAP_TEST_HTTP_OVER_ETCD=1`` (about
300 more tests, left out of ``make test`` to keep it near 100 s; the store contract runs over etcd always):
``AIOBOOTSTRAP_TEST_HTTP_OVER_ETCD=1 make test PYTEST_ARGS='-k etcd'``."""


@pytest.fixture(params=HTTP_STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    """The HTTP suite (every test using ``client``) runs over the memory store and over Redis (etcd: above)."""
    return str(request.param)


@pytest.fixture
async def client(
    aiohttp_client: Any, config: ServerConfig, store_kind: str, request: pytest.FixtureRequest
) -> TestClient[web.Request, web.Application]:
    if store_kind == "etcd" and config.store_url == "memory:":
        cluster = request.getfixturevalue("shared_etcd")
        config = dataclasses.replace(config, store=cluster.url(f"http{next(_PREFIXES)}"))
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
