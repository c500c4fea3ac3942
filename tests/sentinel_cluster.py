"""The Sentinel fixture: one deployment (``testbed/sentinel_cluster.py``) for the module that imports it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testbed.redis_server import REDIS_SERVER, SKIP_REASON
from testbed.sentinel_cluster import SentinelCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelCluster]:
    """One deployment for the module that imports this fixture (its tests fail it over and heal it)."""
    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    deployment = SentinelCluster(tmp_path_factory.mktemp("sentinel"))
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()
