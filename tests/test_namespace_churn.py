"""What a namespace leaves behind is freed with it: namespace churn holds no memory in the metrics."""

from __future__ import annotations

from typing import Any

import pytest

from aiobootstrap import ServerConfig
from aiobootstrap.server.metrics import METRICS

from .helpers.registry import registration
from .helpers.waits import until

KEEP = 4
CHURN = 60


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig(max_namespaces=KEEP)


async def _churn(client: Any) -> None:
    for number in range(CHURN):
        path = f"/ns/gone{number}/register_transfer_engine_info"
        assert (await client.put(path, json=registration(0))).status == 200
        assert (await client.delete(path, params={"rank": "0"})).status == 200


async def test_counts_of_forgotten_namespaces_are_freed_without_a_scrape(client: Any) -> None:
    """PUT then DELETE in 60 new namespaces: the counters hold at most twice --max-namespaces of them,
    and a live namespace's count survives exact.

    Fails before issue 18: the counters held all 60 (and 90,023 held 36 MiB).
    """
    assert (await client.put("/ns/kept/register_transfer_engine_info", json=registration(0))).status == 200
    await _churn(client)
    metrics = client.app[METRICS]
    await until(lambda: metrics._pruning is None)
    assert len(metrics.registrations) <= 2 * KEEP + 1
    assert len(metrics.registrations_by_kind) <= 2 * KEEP + 1
    assert metrics.registrations["kept"] == 1


async def test_a_scrape_forgets_the_counts_of_namespaces_gone(client: Any) -> None:
    """After churn, a scrape leaves only the live namespace's counts."""
    assert (await client.put("/ns/kept/register_transfer_engine_info", json=registration(0))).status == 200
    await _churn(client)
    assert (await client.get("/metrics")).status == 200
    metrics = client.app[METRICS]
    assert dict(metrics.registrations) == {"kept": 1}
    assert dict(metrics.registrations_by_kind) == {("kept", "transfer_engine_info"): 1}
