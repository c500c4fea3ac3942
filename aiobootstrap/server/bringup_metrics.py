"""The bring-up figures of ``/metrics``: per namespace, kind and role, who is in, who is missing, how long waited.

Read with the namespace figures just before a scrape renders (``app``'s
``_namespace_figures``), shown for the namespaces the token covers: so
"ranks missing for 5 minutes" is one alert rule on
``aiobootstrap_missing_ranks > 0 and aiobootstrap_oldest_wait_seconds > 300``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily, Metric

from .._names import DEFAULT_ROLE, RANK_KINDS
from ..core.registry import Registry
from ..store import Key
from ..wire.metadata import METADATA
from ..wire.prefill import PREFILL_RANK, PREFILL_TOPOLOGY, TOPOLOGY_NAME, Topology
from .metrics import KindFigures, Metrics

__all__ = ["BringUpCollector", "kind_figures", "waits_by_namespace"]


def waits_by_namespace(
    waits: Mapping[tuple[str, str, str], float],
) -> dict[str, dict[tuple[str, str], float]]:
    """``Registry.oldest_waits`` grouped by namespace, once per scrape: a namespace's figures then cost
    its own waits, not every namespace's (15,000 namespaces of parked waits took a 43-50 s scrape)."""
    grouped: dict[str, dict[tuple[str, str], float]] = {}
    for (namespace, kind, role), seconds in waits.items():
        grouped.setdefault(namespace, {})[kind, role] = seconds
    return grouped


async def kind_figures(
    registry: Registry, namespace: str, world_size: int | None, waits: Mapping[tuple[str, str], float]
) -> tuple[KindFigures, ...]:
    """Role target of every per-rank kind, and every kind and role with gets parked (``waits``: the
    namespace's, by kind and role, from :func:`waits_by_namespace`)."""
    shown = {(kind, DEFAULT_ROLE) for kind in RANK_KINDS} | set(waits)
    figures = [
        KindFigures(
            kind, role, await registry.count(namespace, kind, role), world_size, waits.get((kind, role), 0.0)
        )
        for kind, role in sorted(shown)
    ]
    return (*figures, *await _face_figures(registry, namespace))


async def _face_figures(registry: Registry, namespace: str) -> list[KindFigures]:
    """The faces' named records: a prefill deployment's ranks (its topology's product of sizes the world
    size, so ``aiobootstrap_missing_ranks`` alerts on it too), and Mooncake's metadata keys, when there are."""
    figures = []
    topology = await registry.get(Key.named(namespace, PREFILL_TOPOLOGY, DEFAULT_ROLE, TOPOLOGY_NAME))
    if topology is not None:
        expected = Topology.from_value(topology.value).expected
        ranks = await registry.count(namespace, PREFILL_RANK, DEFAULT_ROLE)
        figures.append(KindFigures(PREFILL_RANK, DEFAULT_ROLE, ranks, expected, 0.0))
    keys = await registry.count(namespace, METADATA, DEFAULT_ROLE)
    if keys:
        figures.append(KindFigures(METADATA, DEFAULT_ROLE, keys, None, 0.0))
    return figures


class BringUpCollector:
    """A collector for an app's ``CollectorRegistry``: the ``kinds`` (``metrics.KindFigures``) of the namespace figures the scrape read."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        labels = ["namespace", "kind", "role"]
        world = GaugeMetricFamily(
            "aiobootstrap_world_size",
            "The ranks expected (--world-size), by namespace, kind and role.",
            labels=labels,
        )
        registered = GaugeMetricFamily(
            "aiobootstrap_kind_registered_ranks",
            "Ranks registered right now, by namespace, kind and role.",
            labels=labels,
        )
        missing = GaugeMetricFamily(
            "aiobootstrap_missing_ranks",
            "Ranks of the world size not registered right now, by namespace, kind and role.",
            labels=labels,
        )
        oldest = GaugeMetricFamily(
            "aiobootstrap_oldest_wait_seconds",
            "Seconds the longest-parked get for a rank has waited (0 when none is parked), by namespace, "
            "kind and role.",
            labels=labels,
        )
        for namespace in self._metrics.namespaces:
            for each in namespace.kinds:
                where = [namespace.name, each.kind, each.role]
                registered.add_metric(where, each.registered)
                oldest.add_metric(where, each.oldest_wait)
                if each.world_size is not None:
                    world.add_metric(where, each.world_size)
                    missing.add_metric(where, max(0, each.world_size - each.registered))
        yield world
        yield registered
        yield missing
        yield oldest
