"""The app's state under typed ``web.AppKey``s: its config, its registry, the encoder probes' findings.

Each room keeps the key of what it owns (``METRICS`` in ``metrics``,
``BODY_BUDGET`` in ``body``, ``GET_REPLIES`` in ``fastpath.gets``); these
are read by more than one room, so they sit below all of them. ``app`` sets
the first two; the encoder face's start-up sets ``FINDINGS`` (so the native
face's watch and the fast path read it without importing the encoder face).
"""

from __future__ import annotations

from aiohttp import web

from ..core.registry import Registry
from ..core.tally import Tally
from .config import ServerConfig

__all__ = ["CONFIG", "FINDINGS", "REGISTRY"]

CONFIG = web.AppKey("config", ServerConfig)
REGISTRY = web.AppKey("registry", Registry)
"""The registry of every namespace, and through it the store."""
FINDINGS = web.AppKey("encoder_findings", Tally)
"""The encoder probes' rounds that changed a finding (``EncoderHealth.findings``), when probing is on."""
