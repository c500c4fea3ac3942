"""The series ``/metrics`` reads when scraped, beside ``metrics.Metrics``' own counters.

- the bring-up figures (:class:`BringUpCollector`): per namespace, kind and role, who is in, who is
  missing, how long waited;
- the leases (:class:`LeaseCollector`): held, expired and revoked, read through the registry;
- the watches (:class:`WatchCollector`): watches parked (the history's) and event streams open (the
  HTTP side's, ``appkeys.WatchFigures``).

The bring-up figures are read with the namespace figures just before a scrape renders (``app``'s
``_namespace_figures``), shown for the namespaces the token covers: so
"ranks missing for 5 minutes" is one alert rule on
``aiobootstrap_missing_ranks > 0 and aiobootstrap_oldest_wait_seconds > 300``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..core.history import History
from ..core.registry import Registry
from .appkeys import WatchFigures
from .config import ServerConfig
from .face import Face
from .metrics import KindFigures, Metrics

__all__ = [
    "BringUpCollector",
    "LeaseCollector",
    "WatchCollector",
    "kind_figures",
    "waits_by_namespace",
]


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


class WatchCollector:
    """``/metrics``' watch series, read when scraped: watchers parked, streams open."""

    def __init__(self, history: History, figures: WatchFigures) -> None:
        self._history = history
        self._figures = figures

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "aiobootstrap_watchers",
            "Watches parked right now, long-polls and event streams between events.",
            value=self._history.watchers,
        )
        yield GaugeMetricFamily(
            "aiobootstrap_watch_streams",
            "GET /watch event streams open right now.",
            value=self._figures.streams,
        )
