"""The app's state under typed ``web.AppKey``s: its config and its registry.

Each room keeps the key of what it owns (``METRICS`` in ``metrics``,
``BODY_BUDGET`` in ``body``, ``GET_REPLIES`` in ``fastpath.gets``); these two are
read by every handler, so they sit below all of them. ``app`` sets them.
"""

from __future__ import annotations

from aiohttp import web

from ..core.registry import Registry
from .config import ServerConfig

__all__ = ["CONFIG", "REGISTRY"]

CONFIG = web.AppKey("config", ServerConfig)
REGISTRY = web.AppKey("registry", Registry)
"""The registry of every namespace, and through it the store."""
