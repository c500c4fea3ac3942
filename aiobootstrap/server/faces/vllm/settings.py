"""The vLLM face's settings: its probes of the workers' side channels (``--vllm-probe-interval``,
``--vllm-probe-timeout``), and the default port of its drop-in, set by vLLM's own variable. Imports no
aiohttp: the command line reads these options before it loads the server."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

from ..engine_variables import check_seconds, port_variable

__all__ = ["PORT_VARIABLE", "SETTINGS", "VllmSettings", "default_port"]

PORT_VARIABLE = "VLLM_MOONCAKE_BOOTSTRAP_PORT"
"""vLLM's variable for its bootstrap server's port: the drop-in's default port, as vLLM reads it."""
DEFAULT_PORT = 8998
"""vLLM's default for :data:`PORT_VARIABLE`."""


def default_port(environ: Mapping[str, str]) -> int:
    """The drop-in's port when none is given: :data:`PORT_VARIABLE` in ``environ``, else 8998."""
    return port_variable(environ, PORT_VARIABLE, DEFAULT_PORT)


@dataclass(frozen=True, slots=True)
class VllmSettings:
    """How the vLLM face checks the workers it lists (``probes.py``, ``workers.py``); validated on creation."""

    vllm_probe_interval: float = 0.0
    """Seconds between connects to every worker's side channel; 3 failures in a row delete it; 0: no probes."""
    vllm_probe_timeout: float = 1.0
    """Seconds a connect may take, in a probe or when another engine asks for a held dp rank."""

    def __post_init__(self) -> None:
        check_seconds(self.vllm_probe_interval, "vllm probe interval", zero=True)
        check_seconds(self.vllm_probe_timeout, "vllm probe timeout", zero=False)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        defaults = cls()
        parser.add_argument(
            "--vllm-probe-interval",
            type=float,
            default=defaults.vllm_probe_interval,
            metavar="SECONDS",
            help="seconds between TCP connects to every vLLM worker's side channel (its addr); after 3 "
            "failures in a row the worker is deleted; 0 turns them off (default: %(default)g)",
        )
        parser.add_argument(
            "--vllm-probe-timeout",
            type=float,
            default=defaults.vllm_probe_timeout,
            metavar="SECONDS",
            help="seconds a connect to a vLLM worker may take before it counts as failed, in a probe or "
            "when another engine asks for its dp rank (default: %(default)g)",
        )

    @classmethod
    def from_arguments(cls, args: argparse.Namespace, environ: Mapping[str, str]) -> VllmSettings:
        return cls(args.vllm_probe_interval, args.vllm_probe_timeout)


SETTINGS = VllmSettings
"""The face's settings class, read by the command line without loading the face (``server.face_registry``)."""
