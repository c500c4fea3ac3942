"""Metrics in the Prometheus text format, served at ``GET /metrics``.

Each app has its own ``CollectorRegistry`` (never the process-wide default),
so two apps in one process, as in the tests, count apart.

What the registry and the namespaces already know (parked waits, records,
registrations) is read when scraped, by a collector: nothing to keep in step,
and a forgotten namespace's series vanish with it. What only the HTTP layer
sees (how gets end, how long requests take, how fast waiters wake) is counted
here as it happens. Every label has few values: the route label is the route
template, not the path, and the namespace label covers live namespaces only.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Sequence

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ._namespaces import Namespaces
from ._registry import Record
from .exceptions import BootstrapError, NotRegistered

__all__ = ["METRICS", "Metrics", "counts_gets", "metrics", "metrics_middleware"]

GET_OUTCOMES = ("hit", "woken", "expired", "rejected")

_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
# Long-polls last up to --max-wait (300 s by default), plain requests milliseconds.
_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_METHODS = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"})


class _NamespaceCollector:
    """Reads the live namespaces when scraped."""

    def __init__(self, namespaces: Namespaces) -> None:
        self._namespaces = namespaces

    def collect(self) -> Iterator[Metric]:
        registrations = CounterMetricFamily(
            "aiobootstrap_registrations",
            "Registrations answered, by namespace (since the namespace was made).",
            labels=["namespace"],
        )
        ranks = GaugeMetricFamily(
            "aiobootstrap_registered_ranks", "Ranks registered right now, by namespace.", labels=["namespace"]
        )
        parked = GaugeMetricFamily(
            "aiobootstrap_parked_waiters",
            "Get requests waiting right now, by namespace.",
            labels=["namespace"],
        )
        version = GaugeMetricFamily(
            "aiobootstrap_version", "The latest version in each namespace.", labels=["namespace"]
        )
        namespaces = list(self._namespaces)
        for namespace in namespaces:
            registry = namespace.registry
            registrations.add_metric([namespace.name], namespace.registrations)
            ranks.add_metric([namespace.name], len(registry))
            parked.add_metric([namespace.name], registry.parked)
            version.add_metric([namespace.name], registry.version)
        yield registrations
        yield ranks
        yield parked
        yield version
        yield GaugeMetricFamily(
            "aiobootstrap_namespaces", "Namespaces held right now.", value=len(namespaces)
        )


class Metrics:
    """One app's metrics."""

    def __init__(self, namespaces: Namespaces) -> None:
        self.registry = CollectorRegistry()
        self.gets = Counter(
            "aiobootstrap_gets",
            "Get requests (single and batch) by outcome: hit (already registered), woken (arrived "
            "while waiting), expired (not registered when the wait ran out), rejected (an error reply).",
            ["outcome"],
            registry=self.registry,
        )
        for outcome in GET_OUTCOMES:
            self.gets.labels(outcome)
        self.wake_latency = Histogram(
            "aiobootstrap_wake_latency_seconds",
            "From a registration to a get waiting for it being answered.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.request_duration = Histogram(
            "aiobootstrap_request_duration_seconds",
            "Time to answer a request, by route template, method and status.",
            ["route", "method", "status"],
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_NamespaceCollector(namespaces))

    def count_get(self, since: int, found: Sequence[Record], expired: bool) -> None:
        """Count an answered get; ``since`` is the registry's version when it began."""
        if expired:
            self.gets.labels("expired").inc()
            return
        woken = [record for record in found if record.version > since]
        if not woken:
            self.gets.labels("hit").inc()
            return
        self.gets.labels("woken").inc()
        # The registration that completed the answer is the latest one.
        registered = max(record.registered_monotonic for record in woken)
        if registered > 0:
            self.wake_latency.observe(max(0.0, time.monotonic() - registered))

    def render(self) -> bytes:
        return generate_latest(self.registry)


METRICS = web.AppKey("metrics", Metrics)


def counts_gets(handler: Handler) -> Handler:
    """Count the errors a get handler raises as rejected gets (its answers count themselves)."""

    @functools.wraps(handler)
    async def counted(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except NotRegistered:
            raise
        except BootstrapError:
            request.app[METRICS].gets.labels("rejected").inc()
            raise

    return counted


@web.middleware
async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Time every request by route template; outermost, so it sees the error replies too."""
    started = time.perf_counter()
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        _observe(request, exc.status, started)
        raise
    _observe(request, response.status, started)
    return response


def _observe(request: web.Request, status: int, started: float) -> None:
    metrics = request.app.get(METRICS)
    if metrics is None:
        return
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    method = request.method if request.method in _METHODS else "other"
    metrics.request_duration.labels(route, method, str(status)).observe(time.perf_counter() - started)


async def metrics(request: web.Request) -> web.Response:
    """``GET /metrics``: every metric, in the Prometheus text format."""
    return web.Response(body=request.app[METRICS].render(), headers={"Content-Type": CONTENT_TYPE_LATEST})
