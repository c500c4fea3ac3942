"""The Mooncake face's settings: its probes of the engines' RPC addresses (``--mooncake-probe-*``). Imports
no aiohttp: the command line reads these options before it loads the server."""

from __future__ import annotations

import argparse
import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..engine_variables import check_seconds

__all__ = ["SETTINGS", "MooncakeSettings", "Networks", "parse_networks"]

Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]


@dataclass(frozen=True, slots=True)
class MooncakeSettings:
    """How the Mooncake face probes its engines (``probes.py``); validated on creation."""

    mooncake_probe_interval: float = 0.0
    """Seconds between probes of every Mooncake engine's RPC address; 0: no probes (the engines' keys stay)."""
    mooncake_probe_timeout: float = 2.0
    """Seconds a probe may take; a slower one is a failure (3 in a row delete the engine's keys)."""
    mooncake_probe_networks: tuple[str, ...] = ()
    """The networks (CIDRs) the probes may connect to; empty: any address an ``rpc_meta`` value names."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mooncake_probe_interval) and self.mooncake_probe_interval >= 0):
            raise ValueError(
                f"mooncake probe interval must be a number of seconds, 0 or more, not {self.mooncake_probe_interval}"
            )
        check_seconds(self.mooncake_probe_timeout, "mooncake probe timeout", zero=False)
        shown = tuple(str(network) for network in parse_networks(self.mooncake_probe_networks))
        object.__setattr__(self, "mooncake_probe_networks", shown)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        defaults = cls()
        parser.add_argument(
            "--mooncake-probe-interval",
            type=float,
            default=defaults.mooncake_probe_interval,
            metavar="SECONDS",
            help="seconds between probes of every Mooncake engine's RPC address; after 3 failures in a row its "
            "keys are deleted; 0 turns them off (default: %(default)g)",
        )
        parser.add_argument(
            "--mooncake-probe-timeout",
            type=float,
            default=defaults.mooncake_probe_timeout,
            metavar="SECONDS",
            help="seconds a Mooncake probe may take before it counts as failed (default: %(default)g)",
        )
        parser.add_argument(
            "--mooncake-probe-networks",
            default="",
            metavar="CIDR,...",
            help="probe only Mooncake RPC addresses in these networks (host names resolved at each probe); "
            "an address outside is not probed and its keys stay (default: any address)",
        )

    @classmethod
    def from_arguments(cls, args: argparse.Namespace, environ: Mapping[str, str]) -> MooncakeSettings:
        networks = tuple(part.strip() for part in args.mooncake_probe_networks.split(",") if part.strip())
        return cls(args.mooncake_probe_interval, args.mooncake_probe_timeout, networks)


def parse_networks(text: str | Sequence[str]) -> Networks:
    """``CIDR,CIDR,...`` (or a sequence of them) as networks; a one-line ``ValueError`` for one that is not."""
    items = text.split(",") if isinstance(text, str) else list(text)
    networks = []
    for item in (part.strip() for part in items):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(
                f"mooncake probe networks: {item!r} is not a network (give CIDRs such as 10.0.0.0/8,fd00::/8)"
            ) from None
    return tuple(networks)


SETTINGS = MooncakeSettings
"""The face's settings class, read by the command line without loading the face (``server.face_registry``)."""
