"""vLLM's plugin: the callable ``vllm.plugins.load_general_plugins()`` runs (entry point group
``vllm.general_plugins``, name ``aiobootstrap``; ``VLLM_PLUGINS`` filters by that name).

vLLM runs it once in each of its processes and has no hook registry: the
plugin replaces the class itself (``vllm_targets.py``). Installed is not
enabled (``switch.py``): without an aiobootstrap setting it returns having
imported nothing of the server. A setting that cannot be read is one ``ERROR``
line naming it, and nothing is replaced.
"""

from __future__ import annotations

import importlib
import logging
import os

from .switch import enabled

__all__ = ["register"]

log = logging.getLogger("aiobootstrap")

TARGETS = "aiobootstrap.plugins.vllm_targets"
"""The module that replaces vLLM's class, imported once a setting enables the plugin."""


def register() -> None:
    """Put aiobootstrap's server in place of vLLM's Mooncake bootstrap server when the environment asks."""
    try:
        if not enabled(os.environ):
            return
    except ValueError as exc:
        log.error("aiobootstrap plugin: %s; vLLM's own server keeps running", exc)
        return
    importlib.import_module(TARGETS).install(os.environ)
