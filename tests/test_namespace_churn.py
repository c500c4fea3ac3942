"""What a namespace leaves behind is freed with it: namespace churn holds no memory in the metrics
nor in the watch history."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from aiobootstrap import ServerConfig
from aiobootstrap.core.history import forgetting as forgetting_module
from aiobootstrap.core.history.forgetting import MAX_TOMBSTONES, Forgetting
from aiobootstrap.server.appkeys import HISTORY
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


def test_the_versions_kept_of_freed_namespaces_fit_in_half_a_mebibyte() -> None:
    """Churn fills the history's record of freed namespaces up to its cap, and no further: that
    record at its cap, with names as long as churn's, holds under 0.5 MiB.

    Fails before issue 30: 65,536 freed namespaces' versions were kept, so 40,000 namespaces
    made and forgotten left 6.7 MiB behind them.
    """
    forgetting = Forgetting()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for number in range(MAX_TOMBSTONES + 1000):
            forgetting.freed(f"deployment-{number:08d}", 10_000_000 + number)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(forgetting.tombstones) == MAX_TOMBSTONES
    assert held < 512 * 1024


async def test_churn_past_the_caps_holds_each_cap(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past every cap (logs of forgotten namespaces kept, freed namespaces' versions), the history
    holds no more of them than each cap, and a live namespace's log stays."""
    monkeypatch.setattr(forgetting_module, "MAX_TOMBSTONES", 8)
    history = client.app[HISTORY]
    history.forgetting.kept = 4
    assert (await client.put("/ns/kept/register_transfer_engine_info", json=registration(0))).status == 200
    await _churn(client)
    await until(lambda: len(history._logs) <= 4 + 1 and len(history.forgetting.tombstones) == 8)
    assert "kept" in history._logs
