"""The prefill face's settings: its bootstrap rooms' life and number (``--dp-room-ttl``, ``--dp-room-limit``),
the life's default set by SGLang's own variable, as its bootstrap server reads it. Imports no aiohttp: the
command line reads these options before it loads the server."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

from ..engine_variables import add_seconds_option, check_seconds, seconds_variables

__all__ = ["PREFILL_VARIABLES", "SETTINGS", "PrefillSettings"]

PREFILL_VARIABLES = {"dp_room_ttl": "SGLANG_DISAGGREGATION_BOOTSTRAP_ENTRY_CLEANUP_INTERVAL"}
"""SGLang's variable that sets the rooms' life, by field: an option (or an argument) wins over it."""


@dataclass(frozen=True, slots=True)
class PrefillSettings:
    """The prefill face's bootstrap rooms (``rooms.py``); validated on creation."""

    dp_room_ttl: float = 120.0
    """Seconds a prefill bootstrap room (``/register_dp_rank``) lives at least; it is gone by twice that."""
    dp_room_limit: int = 1_000_000
    """Bootstrap rooms one namespace keeps at once (about 100 bytes each in memory): past it a new room is a ``409``."""

    def __post_init__(self) -> None:
        check_seconds(self.dp_room_ttl, "dp room ttl", zero=False)
        if self.dp_room_limit < 1:
            raise ValueError(f"dp room limit must be at least 1 room, not {self.dp_room_limit}")

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        defaults = cls()
        parser.add_argument(
            "--dp-room-limit",
            type=int,
            default=defaults.dp_room_limit,
            metavar="N",
            help="most prefill bootstrap rooms one namespace keeps at once; a new one past it gets 409 "
            "(default: %(default)d)",
        )
        add_seconds_option(
            parser,
            "dp_room_ttl",
            "seconds a prefill bootstrap room lives at least (gone by twice that)",
            defaults.dp_room_ttl,
            PREFILL_VARIABLES["dp_room_ttl"],
        )

    @classmethod
    def from_arguments(cls, args: argparse.Namespace, environ: Mapping[str, str]) -> PrefillSettings:
        """``--dp-room-ttl``, else its variable in ``environ``, else the default; ``--dp-room-limit``."""
        ttl = seconds_variables(environ, PREFILL_VARIABLES).get("dp_room_ttl", cls().dp_room_ttl)
        return cls(ttl if args.dp_room_ttl is None else args.dp_room_ttl, args.dp_room_limit)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> PrefillSettings:
        """The settings SGLang's variable in ``environ`` gives, as SGLang's own server reads it."""
        ttl = seconds_variables(environ, PREFILL_VARIABLES).get("dp_room_ttl")
        return cls() if ttl is None else cls(dp_room_ttl=ttl)


SETTINGS = PrefillSettings
"""The face's settings class, read by the command line without loading the face (``server.face_registry``)."""
