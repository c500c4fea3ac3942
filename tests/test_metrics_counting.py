"""The request path's plain counters scrape as prometheus_client's own Counter and Histogram would."""

from __future__ import annotations

import time

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from aiobootstrap.server.metrics import _DURATION_BUCKETS, _LATENCY_BUCKETS, GET_OUTCOMES, Metrics
from aiobootstrap.store import Record

from .helpers.registry import info_key

# On a bound, just either side of it, below the first, past the last, zero.
_LATENCIES = [0.0, 0.00005, 0.0001, 0.00010001, 0.0009999, 0.001, 0.003, 0.05, 0.5, 1.0, 1.5, 7.0]
_DURATIONS = [0.0, 0.001, 0.0011, 0.005, 0.3, 1.0, 10.0, 299.0, 300.0, 301.0, 1e6]
_NOW = 1000.0
_ROUTES = [("/health", "GET", 200), ("/get_transfer_engine_info", "GET", 404), ("unmatched", "other", 405)]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str, created: bool = False) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if created or not sample.name.endswith("_created")
    }


def _ours(monkeypatch: pytest.MonkeyPatch, created: bool = False) -> Samples:
    metrics = Metrics()
    # A still clock: the latency count_get sees is exactly what _prometheus_clients observes.
    monkeypatch.setattr(time, "time", lambda: _NOW)
    for value in _LATENCIES:
        record = Record(info_key(0), {}, 1, _NOW - value)
        metrics.count_get(0, [record], expired=False)
    resources: dict[str, web.AbstractResource | None] = {
        route: None if route == "unmatched" else web.PlainResource(route) for route, _, _ in _ROUTES
    }
    for route, method, status in _ROUTES:
        for value in _DURATIONS:
            metrics.observe_request(resources[route], method, status, value)
    # Another resource with the same template counts in the same series.
    metrics.observe_request(web.PlainResource("/health"), "GET", 200, 0.5)
    for count, outcome in enumerate(GET_OUTCOMES):
        metrics.gets[outcome] += count
    return {
        key: value
        for key, value in _samples(metrics.render().decode(), created).items()
        if not key[0].startswith(
            ("aiobootstrap_registrations", "aiobootstrap_registered", "aiobootstrap_parked")
        )
        and key[0] not in ("aiobootstrap_version", "aiobootstrap_namespaces")
    }


def _prometheus_clients(created: bool = False) -> Samples:
    registry = CollectorRegistry()
    gets = Counter("aiobootstrap_gets", "gets", ["outcome"], registry=registry)
    wake = Histogram("aiobootstrap_wake_latency_seconds", "wake", buckets=_LATENCY_BUCKETS, registry=registry)
    duration = Histogram(
        "aiobootstrap_request_duration_seconds",
        "duration",
        ["route", "method", "status"],
        buckets=_DURATION_BUCKETS,
        registry=registry,
    )
    for value in _LATENCIES:
        gets.labels("woken").inc()
        wake.observe(_NOW - (_NOW - value))
    for route, method, status in _ROUTES:
        for value in _DURATIONS:
            duration.labels(route, method, str(status)).observe(value)
    duration.labels("/health", "GET", "200").observe(0.5)
    for count, outcome in enumerate(GET_OUTCOMES):
        gets.labels(outcome).inc(count)
    return _samples(generate_latest(registry).decode(), created)


def test_counts_and_buckets_match_prometheus_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bucket (values on a bound included), count, sum and counter equals prometheus_client's."""
    ours = _ours(monkeypatch)
    assert ours == _prometheus_clients()
    on_bound = (
        "aiobootstrap_request_duration_seconds_bucket",
        (("le", "0.001"), ("method", "GET"), ("route", "/health"), ("status", "200")),
    )
    assert ours[on_bound] == 2


def test_the_series_are_prometheus_clients_created_ones_included(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scrape has the series prometheus_client's Counter and Histogram give by default, _created too."""
    assert set(_ours(monkeypatch, created=True)) == set(_prometheus_clients(created=True))
