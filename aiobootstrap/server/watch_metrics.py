"""The watch figures of ``/metrics``: watches parked (the history's) and event streams open (the HTTP side's)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from aiohttp import web
from prometheus_client.core import GaugeMetricFamily, Metric

from ..core.history import History

__all__ = ["WATCH_FIGURES", "WatchCollector", "WatchFigures"]


@dataclass(slots=True)
class WatchFigures:
    """What only the HTTP side of watching knows (the native face's ``/watch`` counts its streams here)."""

    streams: int = 0
    """Event streams open right now."""


WATCH_FIGURES = web.AppKey("watch_figures", WatchFigures)


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
