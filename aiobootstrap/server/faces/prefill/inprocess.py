"""The engines' in-process prefill bootstrap server: ``PrefillBootstrapServer(host, port)`` in place of
SGLang's ``CommonKVBootstrapServer(host, port)`` (and its Mooncake, NIXL and Mori subclasses, which add
nothing), started by the prefill side of a PD deployment on ``--disaggregation-bootstrap-port``."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from ...config import DEFAULT_HOST, merge_settings
from ...threaded import ThreadedBootstrapServer
from .settings import PrefillSettings

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
    as the engines' server does, unless ``dp_room_ttl`` is given (or a
    :class:`PrefillSettings` among ``settings=``); other keyword arguments are
    :class:`ServerConfig` fields.
    """

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PREFILL_PORT,
        *,
        dp_room_ttl: float | None = None,
        **options: Any,
    ) -> None:
        held = options.get("settings", () if options.get("config") is None else options["config"].settings)
        rooms = next((settings for settings in held if isinstance(settings, PrefillSettings)), None)
        if rooms is None:
            rooms = PrefillSettings.from_environment(os.environ)
        if dp_room_ttl is not None:
            rooms = replace(rooms, dp_room_ttl=dp_room_ttl)
        options["settings"] = merge_settings(held, [rooms])
        super().__init__(host, port, **options)
