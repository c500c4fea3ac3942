"""The client's calls of SGLang's prefill bootstrap (PD disaggregation, ``server/faces/prefill``): register a
prefill rank, and wait for the deployment's parallel info, a rank's address, and the dp ranks of rooms.

A wait is one request the server holds (``wait=``), asked again past its
``--max-wait``; one that runs out before the deployment is complete raises
:class:`ServerUnavailable` with the server's sentence ("Prefill server not
fully registered yet (N workers registered).").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .. import wire
from .._json import dumps
from ..exceptions import NotRegistered
from ..wire.prefill import Coords
from . import calls
from .leases import ClientLease, send_registration
from .restarts import Replay
from .retry import Deadline
from .transport import Reply, Transport

__all__ = ["PrefillCalls"]

_ALL = {"prefill_dp_rank": "-1", "prefill_cp_rank": "-1", "target_tp_rank": "-1", "target_pp_rank": "-1"}


def _route(coords: Coords) -> dict[str, str]:
    return {
        "prefill_dp_rank": str(coords.dp),
        "prefill_cp_rank": str(coords.cp),
        "target_tp_rank": str(coords.tp),
        "target_pp_rank": str(coords.pp),
    }


class PrefillCalls:
    """The prefill bootstrap's calls, a part of :class:`BootstrapClient` (which sets ``_transport``)."""

    _transport: Transport

    async def register_prefill_rank(
        self, rank: Mapping[str, Any], *, timeout: float | None = 60.0, lease: ClientLease | None = None
    ) -> None:
        """Register a prefill rank: ``rank`` is the body SGLang's ``register_to_bootstrap`` sends (its
        sizes, ranks, ``rank_ip``, ``rank_port``, ``page_size``, ``kv_cache_dtype``...). ``lease``: it
        leaves with the lease. Retried like :meth:`register`; a contradicting topology raises the ``409``."""
        body = dumps(dict(rank))
        replay = Replay("PUT", wire.PREFILL_ROUTE_PATH, body)
        key = (wire.PREFILL_ROUTE_PATH, json.dumps([rank.get(name) for name in _IDENTITY]))
        await send_registration(self._transport, key, replay, timeout, lease)

    async def prefill_parallel_info(self, *, timeout: float | None = 60.0) -> dict[str, Any]:
        """The deployment's parallel info (``GET /route`` with the four ``-1``), once every rank registered."""
        reply = await self._transport.long_poll(
            wire.PREFILL_ROUTE_PATH,
            lambda wait: {**_ALL, "wait": f"{wait:g}"},
            Deadline(timeout),
            self._answered,
        )
        info: dict[str, Any] = json.loads(reply.body)
        return info

    async def prefill_rank_address(
        self, dp: int, cp: int, tp: int, pp: int, *, timeout: float | None = 60.0
    ) -> tuple[str, int]:
        """A prefill rank's ``(rank_ip, rank_port)``, once the deployment is complete and the rank is in it;
        :class:`NotRegistered` when the deployment is complete without it at the deadline."""
        query = _route(Coords(dp, cp, tp, pp))
        reply = await self._transport.long_poll(
            wire.PREFILL_ROUTE_PATH,
            lambda wait: {**query, "wait": f"{wait:g}"},
            Deadline(timeout),
            self._answered,
        )
        if reply.status == 404:
            raise NotRegistered(reply.body.decode(errors="replace"))
        address = json.loads(reply.body)
        return str(address["rank_ip"]), int(address["rank_port"])

    async def register_dp_rank(self, room: int, dp_rank: int, *, timeout: float | None = 60.0) -> None:
        """Say bootstrap ``room`` went to prefill ``dp_rank`` (kept ``--dp-room-ttl`` to twice that)."""
        body = dumps({"bootstrap_room": room, "dp_rank": dp_rank})
        await calls.request(
            self._transport, "POST", wire.PREFILL_REGISTER_ROOM_PATH, Deadline(timeout), body=body
        )

    async def query_dp_ranks(self, rooms: Sequence[int], *, wait: float = 0.0) -> dict[int, int]:
        """The dp rank of each of ``rooms`` known; with ``wait``, once all are known or ``wait`` seconds passed."""
        body = dumps({"bootstrap_rooms": list(rooms)})
        deadline = Deadline(wait)
        reply = await self._transport.call(
            "POST",
            wire.PREFILL_QUERY_ROOMS_PATH,
            deadline,
            params=lambda: {"wait": f"{max(0.0, deadline.remaining()):g}"},
            body=body,
            read_timeout=wait + calls.READ_TIMEOUT,
            parks=wait > 0,
        )
        if reply.status != 200:
            raise self._transport.error(reply.status, wire.PREFILL_QUERY_ROOMS_PATH, reply.body)
        return {int(room): int(dp_rank) for room, dp_rank in json.loads(reply.body).items()}

    async def prefill_status(self, *, timeout: float | None = 60.0) -> dict[str, Any]:
        """The deployment as ``GET /prefill`` lists it: ``topology`` (``None`` before the first rank),
        ``expected``, ``registered``, ``complete``, ``ranks`` and ``missing`` (names, at most 1,024)."""
        reply = await calls.request(self._transport, "GET", wire.PREFILL_LISTING_PATH, Deadline(timeout))
        status: dict[str, Any] = json.loads(reply.body)
        return status

    def _answered(self, path: str, reply: Reply) -> bool:
        """A ``200`` ends the wait, and a rank's ``404`` once complete; anything else is its error."""
        if reply.status == 200:
            return True
        if reply.status == 404 and not reply.body.startswith(b"{"):
            return True  # the deployment's own text: complete, and this rank not in it
        raise self._transport.error(reply.status, path, reply.body)


_IDENTITY = ("attn_dp_rank", "system_dp_rank", "attn_cp_rank", "attn_tp_rank", "pp_rank")
"""The fields that tell one prefill rank's registration from another's (for re-registering on a restart)."""
