"""The encoder face's settings: its probes (``--encoder-health-*``, ``--encoder-evicted-ttl``), whose
defaults SGLang's own variables set (``SGLANG_ENCODER_BOOTSTRAP_*``), as its encoder bootstrap server reads
them. Imports no aiohttp: the command line reads these options before it loads the server."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

from ..engine_variables import add_seconds_option, check_seconds, seconds_variables

__all__ = ["ENCODER_VARIABLES", "SETTINGS", "EncoderSettings"]

ENCODER_VARIABLES = {
    "encoder_health_interval": "SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_INTERVAL",
    "encoder_health_timeout": "SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_TIMEOUT",
    "encoder_evicted_ttl": "SGLANG_ENCODER_BOOTSTRAP_EVICTED_TTL",
}
"""SGLang's variables that set the probes' defaults, by field: an option (or an argument) wins over one."""

_HELP = {
    "encoder_health_interval": "seconds between health probes of encoder URLs; 0 turns them off",
    "encoder_health_timeout": "seconds an encoder's GET /health may take before it counts as failed",
    "encoder_evicted_ttl": "seconds an evicted encoder URL is still probed for revival; 0 for ever",
}


@dataclass(frozen=True, slots=True)
class EncoderSettings:
    """How the encoder face probes the URLs it lists (``health.py``); validated on creation."""

    encoder_health_interval: float = 10.0
    """Seconds between probes of every listed and evicted encoder URL (``GET <url>/health``); 0: no probes."""
    encoder_health_timeout: float = 2.0
    """Seconds a probe may take; a slower one is a failure (3 in a row evict the URL)."""
    encoder_evicted_ttl: float = 600.0
    """Seconds an evicted URL is still probed (and revived when healthy); 0: for ever."""

    def __post_init__(self) -> None:
        check_seconds(self.encoder_health_interval, "encoder health interval", zero=True)
        check_seconds(self.encoder_evicted_ttl, "encoder evicted ttl", zero=True)
        check_seconds(self.encoder_health_timeout, "encoder health timeout", zero=False)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        defaults = cls()
        for field_name, variable in ENCODER_VARIABLES.items():
            add_seconds_option(parser, field_name, _HELP[field_name], getattr(defaults, field_name), variable)

    @classmethod
    def from_arguments(cls, args: argparse.Namespace, environ: Mapping[str, str]) -> EncoderSettings:
        """Each option given, else its variable in ``environ``, else the default; a variable that is not a
        number is a one-line ``ValueError`` naming it (even when its option is given)."""
        values = seconds_variables(environ, ENCODER_VARIABLES)
        for field_name in ENCODER_VARIABLES:
            given = getattr(args, field_name)
            if given is not None:
                values[field_name] = given
        return cls(**values)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> EncoderSettings:
        """The settings SGLang's variables in ``environ`` give, as SGLang's own class reads them."""
        return cls(**seconds_variables(environ, ENCODER_VARIABLES))


SETTINGS = EncoderSettings
"""The face's settings class, read by the command line without loading the face (``server.face_registry``)."""
