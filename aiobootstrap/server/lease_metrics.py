"""The lease figures of ``/metrics``: leases held, expirations and revocations, read through the registry when scraped."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..core.registry import Registry

__all__ = ["LeaseCollector"]


class LeaseCollector:
    """A collector for an app's ``CollectorRegistry``: the store's lease figures, nothing for a store without."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        figures = self._registry.lease_figures()
        if figures is None:
            return
        held, expired, revoked = figures
        yield GaugeMetricFamily("aiobootstrap_leases", "Leases held right now, every namespace.", value=held)
        yield CounterMetricFamily(
            "aiobootstrap_lease_expirations",
            "Leases expired (not kept alive) since the server started.",
            value=expired,
        )
        yield CounterMetricFamily(
            "aiobootstrap_lease_revocations", "Leases revoked since the server started.", value=revoked
        )
