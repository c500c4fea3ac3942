"""The app's state under typed ``web.AppKey``s: its config, its registry, its faces' kinds, a probe's changes,
the watch streams open.

Each room keeps the key of what it owns (``METRICS`` in ``metrics``,
``BODY_BUDGET`` in ``body``, ``GET_REPLIES`` in ``fastpath.gets``); these
are read by more than one room, so they sit below all of them. ``app`` sets
the first three; a face that probes what its records name sets ``PROBE_CHANGES``
at its start-up (so the native face's watch and the fast path read it without
importing that face).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from ..core.history import History
from ..core.registry import Registry
from ..core.tally import Tally
from .config import ServerConfig
from .kind_spec import KindTable

__all__ = ["CONFIG", "HISTORY", "KIND_TABLE", "PROBE_CHANGES", "REGISTRY", "WATCH_FIGURES", "WatchFigures"]

CONFIG = web.AppKey("config", ServerConfig)
REGISTRY = web.AppKey("registry", Registry)
"""The registry of every namespace, and through it the store."""
HISTORY = web.AppKey("history", History)
"""The watch history of every namespace (``app`` makes it beside the registry; the native face's ``/watch``
reads it)."""
KIND_TABLE = web.AppKey("kind_table", KindTable)
"""Every record kind the app's faces declare (``Face.kinds``), by name."""
PROBE_CHANGES = web.AppKey("probe_changes", Tally)
"""A face's probe changes, when it probes: a tally of its probe rounds that changed what they found (a watch's
``&findings=`` follows it)."""


@dataclass(slots=True)
class WatchFigures:
    """What only the HTTP side of watching knows (the native face's ``/watch`` counts its streams here)."""

    streams: int = 0
    """Event streams open right now."""


WATCH_FIGURES = web.AppKey("watch_figures", WatchFigures)
"""The streams the responder counts, which ``/metrics`` shows (``collectors.WatchCollector``)."""
