"""Metrics in the Prometheus text format, served at ``GET /metrics``.

Each app has its own ``CollectorRegistry`` (never the process-wide default),
so two apps in one process, as in the tests, count apart.

What the registry and the namespaces already know (parked waits, records,
registrations) is read when scraped, by a collector: nothing to keep in step,
and a forgotten namespace's series vanish with it. What only the HTTP layer
sees (how gets end, how long requests take, how fast waiters wake) is counted
here as it happens. Every label has few values: the route label is the route
template, not the path, and the namespace label covers live namespaces only
(those the scraping token covers: a team's token sees its own).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from ..exceptions import BootstrapError, NotRegistered
from ..store import Record
from .access import GUARD
from .kind_spec import KindFigures, NamespaceCount

__all__ = [
    "METRICS",
    "NAMESPACE_FIGURES",
    "KindFigures",
    "Metrics",
    "NamespaceFigures",
    "counts_gets",
    "metrics",
    "observe_answer",
]

GET_OUTCOMES = ("hit", "woken", "expired", "rejected")

_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
# Long-polls last up to --max-wait (300 s by default), plain requests milliseconds.
_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_METHODS = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class NamespaceFigures:
    """What a scrape shows of one namespace, read from the store and the registry just before."""

    name: str
    parked: int
    version: int
    counts: Mapping[str, int] = field(default_factory=dict)
    """The faces' named counts (``Face.counts``): ``/namespaces``' fields, and gauges of their own."""
    kinds: tuple[KindFigures, ...] = ()
    """Per kind and role: registered, world size, oldest wait (``collectors.BringUpCollector`` shows them)."""


class _NamespaceCollector:
    """Shows the namespace figures the scrape read last (see :func:`metrics`)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        registrations = CounterMetricFamily(
            "aiobootstrap_registrations",
            "Registrations answered by this server, by namespace.",
            labels=["namespace"],
        )
        parked = GaugeMetricFamily(
            "aiobootstrap_parked_waiters",
            "Get requests waiting right now, by namespace.",
            labels=["namespace"],
        )
        version = GaugeMetricFamily(
            "aiobootstrap_version", "The latest version in each namespace.", labels=["namespace"]
        )
        by_kind = CounterMetricFamily(
            "aiobootstrap_kind_registrations",
            "Registrations answered by this server, by namespace and record kind.",
            labels=["namespace", "kind"],
        )
        gauges = [
            (count.name, GaugeMetricFamily(count.metric, count.help, labels=["namespace"]))
            for count in self._metrics.counts
            if count.metric is not None
        ]
        figures = self._metrics.namespaces
        # Grouped once: each namespace then costs its own kinds, not every namespace's counts.
        kinds_counted: dict[str, list[tuple[str, int]]] = {}
        for (name, kind), count in sorted(self._metrics.registrations_by_kind.items()):
            kinds_counted.setdefault(name, []).append((kind, count))
        for namespace in figures:
            registrations.add_metric([namespace.name], self._metrics.registrations[namespace.name])
            parked.add_metric([namespace.name], namespace.parked)
            version.add_metric([namespace.name], namespace.version)
            for name, gauge in gauges:
                gauge.add_metric([namespace.name], namespace.counts.get(name, 0))
            for kind, count in kinds_counted.get(namespace.name, ()):
                by_kind.add_metric([namespace.name, kind], count)
        yield by_kind
        for _, gauge in gauges:
            yield gauge
        yield registrations
        yield parked
        yield version
        yield GaugeMetricFamily(
            "aiobootstrap_namespaces", "Namespaces holding records or waits right now.", value=len(figures)
        )


class _Histogram:
    """One histogram series: a count per bucket, kept as plain numbers.

    prometheus_client's ``Histogram.observe`` takes a lock per bucket and per
    sum and walks the buckets in Python; with ``.labels()`` before it and the
    get counter's ``labels().inc()``, that was about a quarter of the profiled
    time per woken waiter (docs/benchmarks.md). Everything here runs
    on the app's one event loop thread, the scrape included, so nothing needs
    a lock; ``bisect`` finds the bucket (``le`` is an inclusive upper bound).
    """

    __slots__ = ("counts", "created", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.created = time.time()

    def samples(
        self, name: str, labels: dict[str, str], bounds: Sequence[float]
    ) -> Iterator[tuple[str, dict[str, str], float]]:
        """The series' samples in prometheus_client's order: buckets (cumulative), count, sum, created."""
        total = 0
        for bound, count in zip((*bounds, float("inf")), self.counts, strict=True):
            total += count
            le = floatToGoString(bound)  # type: ignore[no-untyped-call]
            yield f"{name}_bucket", {**labels, "le": le}, float(total)
        yield f"{name}_count", labels, float(total)
        yield f"{name}_sum", labels, self.sum
        yield f"{name}_created", labels, self.created


class Metrics:
    """One app's metrics.

    The counters and histograms of the request path are plain numbers written
    on the event loop and turned into Prometheus families when scraped
    (``collect``): a woken waiter costs a few list and dict operations instead
    of prometheus_client's locked ``labels().inc()`` and ``observe()``. The
    text a scrape returns is the same as theirs with its default settings,
    ``_created`` series included. That part is ours to decide, always on: its
    switch (``disable_created_metrics()``) has no public reader, and a
    series that comes and goes with another library's global would surprise.
    """

    def __init__(
        self,
        live: Callable[[], Awaitable[Collection[str]]] | None = None,
        keep: int = 1024,
        *,
        counts: Sequence[NamespaceCount] = (),
    ) -> None:
        """``live`` reads the namespaces alive now (holding records or waits): when the counters hold
        more than twice ``keep`` namespaces, those of the others are forgotten (as at each scrape).
        ``counts``: the faces' named counts, each shown as a gauge of its own if it names one."""
        self.counts = tuple(counts)
        self._live = live
        self._keep = keep
        self._pruning: asyncio.Task[None] | None = None
        self.registry = CollectorRegistry()
        self.registrations: collections.Counter[str] = collections.Counter()
        """Registrations answered, by namespace (every kind)."""
        self.registrations_by_kind: collections.Counter[tuple[str, str]] = collections.Counter()
        """Registrations answered, by namespace and record kind."""
        self.namespaces: list[NamespaceFigures] = []
        """The namespaces as the latest scrape read them."""
        created = time.time()
        self.gets = dict.fromkeys(GET_OUTCOMES, 0)
        self._gets_created = dict.fromkeys(GET_OUTCOMES, created)
        self.wake_latency = _Histogram(_LATENCY_BUCKETS)
        self.request_duration: dict[tuple[str, str, str], _Histogram] = {}
        """By label values: route template, method, status."""
        self._series: dict[tuple[web.AbstractResource | None, str, int], _Histogram] = {}
        self.registry.register(self)
        self.registry.register(_NamespaceCollector(self))

    def count_registration(self, namespace: str, kind: str) -> None:
        """Count an answered registration of ``kind`` (a kind's name)."""
        self.registrations[namespace] += 1
        self.registrations_by_kind[namespace, kind] += 1
        if len(self.registrations) > 2 * self._keep and self._live is not None and self._pruning is None:
            # Namespaces come and go (PUT, then DELETE, in a new one each time): their counts
            # go with them, at a cost of one read per `keep` namespaces counted.
            self._pruning = asyncio.get_running_loop().create_task(self._prune(self._live))

    def forget(self, counted: Collection[str], live: Collection[str]) -> None:
        """Forget what was counted of the namespaces ``counted`` (before ``live`` was read) not in ``live``.

        A namespace first counted while ``live`` was being read is kept: it may be newer than the read.
        """
        gone = {namespace for namespace in counted if namespace not in live}
        for namespace in gone:
            self.registrations.pop(namespace, None)
        for pair in [pair for pair in self.registrations_by_kind if pair[0] in gone]:
            del self.registrations_by_kind[pair]

    async def _prune(self, live: Callable[[], Awaitable[Collection[str]]]) -> None:
        try:
            counted = list(self.registrations)
            with contextlib.suppress(BootstrapError):  # the store is away: the next count tries again
                self.forget(counted, set(await live()))
        finally:
            self._pruning = None

    async def close(self) -> None:
        """Stop a prune under way."""
        if self._pruning is not None:
            self._pruning.cancel()
            await asyncio.wait({self._pruning})

    def count_get(self, since: float, found: Sequence[Record], expired: bool) -> None:
        """Count an answered get; ``since`` is the wall-clock time it began."""
        if expired:
            self.gets["expired"] += 1
            return
        # The registration that completed the answer is the latest one. A plain
        # loop: this runs once per woken waiter, a thousand times in a row.
        woken = False
        registered = 0.0
        for record in found:
            if record.registered_at > since:
                woken = True
                registered = max(registered, record.registered_at)
        if not woken:
            self.gets["hit"] += 1
            return
        self.gets["woken"] += 1
        if registered > 0:
            latency = max(0.0, time.time() - registered)
            series = self.wake_latency
            series.counts[bisect_left(_LATENCY_BUCKETS, latency)] += 1
            series.sum += latency

    def observe_request(
        self, resource: web.AbstractResource | None, method: str, status: int, seconds: float
    ) -> None:
        """Time a request answered by ``resource`` (``None``: no route matched); ``method`` is a label."""
        # Found by the resource object itself, not its label: no label to build
        # per request. Resources, methods (already labels) and statuses are few.
        key = (resource, method, status)
        series = self._series.get(key)
        if series is None:
            route = resource.canonical if resource is not None else "unmatched"
            labels = (route, method, str(status))
            series = self.request_duration.get(labels)
            if series is None:
                series = self.request_duration[labels] = _Histogram(_DURATION_BUCKETS)
            self._series[key] = series
        series.counts[bisect_left(_DURATION_BUCKETS, seconds)] += 1
        series.sum += seconds

    def collect(self) -> Iterator[Metric]:
        """The request path's families, for the ``CollectorRegistry``."""
        gets = Metric(
            "aiobootstrap_gets",
            "Get requests (single and batch) by outcome: hit (already registered), woken (arrived "
            "while waiting), expired (not registered when the wait ran out), rejected (an error reply).",
            "counter",
        )
        for outcome, count in self.gets.items():
            gets.add_sample("aiobootstrap_gets_total", {"outcome": outcome}, float(count))
            gets.add_sample("aiobootstrap_gets_created", {"outcome": outcome}, self._gets_created[outcome])
        yield gets
        name = "aiobootstrap_wake_latency_seconds"
        wake = Metric(name, "From a registration to a get waiting for it being answered.", "histogram")
        for sample in self.wake_latency.samples(name, {}, _LATENCY_BUCKETS):
            wake.add_sample(*sample)
        yield wake
        name = "aiobootstrap_request_duration_seconds"
        duration = Metric(
            name, "Time to answer a request, by route template, method and status.", "histogram"
        )
        for (route, method, status), series in list(self.request_duration.items()):
            labels = {"route": route, "method": method, "status": status}
            for sample in series.samples(name, labels, _DURATION_BUCKETS):
                duration.add_sample(*sample)
        yield duration

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def render_off_the_loop(self) -> bytes:
        """:meth:`render`, its text written in a thread: the families are read on the loop (what the
        collectors read changes on it), then formatted elsewhere (13 MB of text for 15,000 namespaces
        held the loop for seconds)."""
        collected = _Collected(list(self.registry.collect()))
        return await asyncio.to_thread(generate_latest, collected)


class _Collected:
    """Families collected already, as ``generate_latest`` reads a registry (its ``collect``)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


METRICS = web.AppKey("metrics", Metrics)


_GetHandler = TypeVar("_GetHandler", bound=Callable[[web.Request], Awaitable[Any]])


def counts_gets(handler: _GetHandler) -> _GetHandler:
    """Count the errors a get handler raises as rejected gets (its answers count themselves; a wait the
    fast path's responder makes counts its own, ``fastpath.replies.RecordWait.counted``)."""

    @functools.wraps(handler)
    async def counted(request: web.Request) -> Any:
        try:
            return await handler(request)
        except NotRegistered:
            raise
        except BootstrapError:
            request.app[METRICS].gets["rejected"] += 1
            raise

    return cast(_GetHandler, counted)


def observe_answer(request: web.Request, status: int, started: float) -> None:
    """Time ``request``, answered ``status``, from ``started`` (``time.perf_counter()``) until now."""
    seconds = time.perf_counter() - started
    match = request.match_info
    metrics = match.current_app.get(METRICS)  # request.app
    if metrics is None:
        return
    method = request.method
    resource = match.route.resource
    metrics.observe_request(resource, method if method in _METHODS else "other", status, seconds)


async def metrics(request: web.Request) -> web.Response:
    """``GET /metrics``: every metric, in the Prometheus text format.

    The namespaces' series are those of the namespaces the token covers (all of them with open reads).
    """
    figures = request.app[METRICS]
    counted = list(figures.registrations)
    every = await request.app[NAMESPACE_FIGURES]()
    figures.forget(counted, {namespace.name for namespace in every})
    figures.namespaces = shown_to(request, every)
    return web.Response(
        body=await figures.render_off_the_loop(), headers={"Content-Type": CONTENT_TYPE_LATEST}
    )


async def shown_namespaces(request: web.Request) -> list[NamespaceFigures]:
    """The figures of the namespaces ``request`` may see (:func:`shown_to`), read now."""
    return shown_to(request, await request.app[NAMESPACE_FIGURES]())


def shown_to(request: web.Request, figures: list[NamespaceFigures]) -> list[NamespaceFigures]:
    """The ``figures`` of the namespaces ``request`` may see: the ones its token covers (every one
    without tokens or with open reads). ``/metrics`` and ``/namespaces`` show the same."""
    guard = request.app.get(GUARD)
    listed = None if guard is None else guard.listed(request)
    return figures if listed is None else [each for each in figures if each.name in listed]


NAMESPACE_FIGURES: web.AppKey[Callable[[], Awaitable[list[NamespaceFigures]]]] = web.AppKey(
    "namespace_figures"
)
"""How a scrape reads the namespaces: the app reads them from its store and registry."""
