"""The Redis fixtures (a plugin of ``conftest``): a redis-server of the test's own, and one the HTTP suite
over Redis shares; each skips, with a reason, where redis-server is missing (``testbed/redis_server.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.redis_server import REDIS_SERVER, SKIP_REASON, RedisServer


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server on a free loopback port in its own directory (AOF always), killed at the end."""
    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    directory = tmp_path / "redis"
    directory.mkdir()
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def shared_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for every test that runs the HTTP suite over Redis (each test under its own prefix)."""
    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
