"""The engines' in-process prefill bootstrap server: ``PrefillBootstrapServer(host, port)`` in place of
SGLang's ``CommonKVBootstrapServer(host, port)`` (and its Mooncake, NIXL and Mori subclasses, which add
nothing), started by the prefill side of a PD deployment on ``--disaggregation-bootstrap-port``."""

from __future__ import annotations

import os
from typing import Any

from ...config import DEFAULT_HOST, engine_settings
from ...threaded import ThreadedBootstrapServer

__all__ = ["PrefillBootstrapServer"]

DEFAULT_PREFILL_PORT = 8998
"""SGLang's ``--disaggregation-bootstrap-port`` default."""


class PrefillBootstrapServer(ThreadedBootstrapServer):
    """A drop-in for the engines' ``CommonKVBootstrapServer``: the whole server in a daemon thread.

    ::

        server = PrefillBootstrapServer("0.0.0.0", 8998)   # serving when it returns
        ...
        server.close()                                     # stops, frees the port

    It serves ``/route``, ``/register_dp_rank`` and ``/query_dp_ranks`` as the
    engines' server does (and every other route of aiobootstrap's). A taken port
    raises :class:`AddressInUse` naming its holder, in the caller's thread. The
    rooms' life reads ``SGLANG_DISAGGREGATION_BOOTSTRAP_ENTRY_CLEANUP_INTERVAL``,
    as the engines' server does, unless ``dp_room_ttl`` is given; other keyword
    arguments are :class:`ServerConfig` fields.
    """

    def __init__(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PREFILL_PORT, **options: Any) -> None:
        settings = engine_settings(os.environ)
        if "dp_room_ttl" in settings:
            options.setdefault("dp_room_ttl", settings["dp_room_ttl"])
        super().__init__(host, port, **options)
