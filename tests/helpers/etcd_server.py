"""The etcd fixtures (a plugin of ``conftest``): real etcd members (``testbed/etcd_server.py``), one or three,
shared by a worker's tests or a test's own; each skips, with a reason starting "etcd", where etcd or aetcd
is missing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.etcd_server import Cluster, skip_reason


def _cluster(directory: Path, size: int, *, start: bool = True) -> Iterator[Cluster]:
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    cluster = Cluster(directory, size)
    try:
        if start:
            cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def shared_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One etcd member for every test of a worker that needs only a working etcd (each under its own prefix)."""
    yield from _cluster(tmp_path_factory.mktemp("etcd"), 1)


@pytest.fixture(scope="session")
def shared_etcd_three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three etcd members for every test of a worker that runs the store's contract over a whole cluster
    (each under its own prefix; never killed: a test that kills members has its own ``etcd_cluster``)."""
    yield from _cluster(tmp_path_factory.mktemp("etcd3"), 3)


@pytest.fixture
def etcd_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Three etcd members of the test's own, which it may kill, start again and wipe."""
    yield from _cluster(tmp_path / "etcd", 3)


@pytest.fixture
def etcd_member(tmp_path: Path) -> Iterator[Cluster]:
    """One etcd member of the test's own (to stop or wipe)."""
    yield from _cluster(tmp_path / "etcd", 1)


@pytest.fixture
def etcd_unstarted(tmp_path: Path) -> Iterator[Cluster]:
    """One etcd member of the test's own, not started: the test sets its options (TLS, say) first."""
    yield from _cluster(tmp_path / "etcd", 1, start=False)
