"""The bring-up figures of ``/metrics``: per namespace, kind and role, who is in, who is missing, how long waited.

Read with the namespace figures just before a scrape renders (``app``'s
``_namespace_figures``), shown for the namespaces the token covers: so
"ranks missing for 5 minutes" is one alert rule on
``aiobootstrap_missing_ranks > 0 and aiobootstrap_oldest_wait_seconds > 300``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

from prometheus_client.core import GaugeMetricFamily, Metric

from ..core.registry import Registry
from .config import ServerConfig
from .face import Face
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
    registry: Registry,
    namespace: str,
    faces: Sequence[Face],
    config: ServerConfig,
    waits: Mapping[tuple[str, str], float],
) -> tuple[KindFigures, ...]:
    """What each face counts of its records in ``namespace`` (``Face.figures``), and every kind and role
    with gets parked, each with its oldest wait (``waits``: the namespace's, by kind and role, from
    :func:`waits_by_namespace`), in order of kind and role."""
    shown: dict[tuple[str, str], KindFigures] = {}
    for face in faces:
        if face.figures is not None:
            for each in await face.figures(registry, namespace, config):
                shown[each.kind, each.role] = each
    for (kind, role), seconds in waits.items():
        declared = shown.get((kind, role))
        if declared is None:
            count = await registry.count(namespace, kind, role)
            shown[kind, role] = KindFigures(kind, role, count, config.world_size, seconds)
        else:
            shown[kind, role] = replace(declared, oldest_wait=seconds)
    return tuple(shown[where] for where in sorted(shown))


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
