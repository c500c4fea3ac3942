"""SGLang's plugin: the callable ``sglang.srt.plugins.load_plugins()`` runs (entry point group
``sglang.srt.plugins``, name ``aiobootstrap``; ``SGLANG_PLUGINS`` filters by that name).

SGLang runs it once in each of its processes (the engine, the schedulers, the
detokenizer, the data-parallel controller), then applies the hooks it
registered. Installed is not enabled (``switch.py``): without an aiobootstrap
setting it returns having imported nothing of the server; enabled, it
registers the hooks of ``sglang_targets.py``. A setting that cannot be read is
one ``ERROR`` line naming it, and nothing is replaced.
"""

from __future__ import annotations

import importlib
import logging
import os

from .switch import enabled

__all__ = ["register"]

log = logging.getLogger("aiobootstrap")

TARGETS = "aiobootstrap.plugins.sglang_targets"
"""The module that registers the hooks, imported once a setting enables the plugin."""


def register() -> None:
    """Register aiobootstrap's hooks with SGLang's ``HookRegistry`` when the environment enables them."""
    try:
        if not enabled(os.environ):
            return
    except ValueError as exc:
        log.error("aiobootstrap plugin: %s; SGLang's own servers keep running", exc)
        return
    importlib.import_module(TARGETS).install(os.environ)
