"""The client's calls of SGLang's prefill bootstrap (PD disaggregation, ``server/faces/prefill``): register a
prefill rank, and wait for the deployment's parallel info, a rank's address, and the dp ranks of rooms.

Each is a function of the transport that :class:`BootstrapClient` makes one of
its methods. A wait is one request the server holds (``wait=``), asked again
past its ``--max-wait``; one that runs out before the deployment is complete
raises :class:`RankNotRegistered`, as a ``get`` of a rank not registered does: the server's sentence
("Prefill server not fully registered yet (N workers registered).") and the ranks still missing, by name
(``dp0-cp0-tp1-pp0``). :class:`ServerUnavailable` is left to a server that does not answer. A rank that
contradicts the deployment's topology raises :class:`TopologyConflict`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._json import dumps
from ..exceptions import BootstrapError, RankNotRegistered, ServerUnavailable
from ..wire.prefill import Coords, not_ready_text
from ..wire.routes import (
    PREFILL_LISTING_PATH,
    PREFILL_QUERY_ROOMS_PATH,
    PREFILL_REGISTER_ROOM_PATH,
    PREFILL_ROUTE_PATH,
)
from . import calls
from .leases import ClientLease, send_registration
from .restarts import Replay
from .retry import Deadline
from .transport import Reply, Transport

__all__ = [
    "prefill_parallel_info",
    "prefill_rank_address",
    "prefill_status",
    "query_dp_ranks",
    "register_dp_rank",
    "register_prefill_rank",
]

_ALL = Coords(-1, -1, -1, -1)
"""The route query of the parallel info: all four ``-1``."""
_NOT_READY = not_ready_text(0).partition(" (")[0]
"""How the server's ``503`` of an incomplete deployment begins ("Prefill server not fully registered yet")."""
_NOUN = "prefill rank"
"""What a :class:`RankNotRegistered` of this face names as missing."""
_NAMED = 8
"""The missing ranks an incomplete deployment's error names (then a count of the rest)."""
_NAMING_READ = 2.0
"""Seconds the read of the missing ranks may take, past a wait's deadline."""
_IDENTITY = ("attn_dp_rank", "system_dp_rank", "attn_cp_rank", "attn_tp_rank", "pp_rank")
"""The fields that tell one prefill rank's registration from another's (for re-registering on a restart)."""


async def register_prefill_rank(
    transport: Transport,
    rank: Mapping[str, Any],
    *,
    timeout: float | None = 60.0,
    lease: ClientLease | None = None,
) -> None:
    """Register a prefill rank: ``rank`` is the body SGLang's ``register_to_bootstrap`` sends (its
    sizes, ranks, ``rank_ip``, ``rank_port``, ``page_size``, ``kv_cache_dtype``...). ``lease``: it
    leaves with the lease. Retried like :meth:`register`; a contradicting topology, or another
    ``decode_allocation_policy`` or ``dsv41_spec_layout`` than the deployment's, raises
    :class:`TopologyConflict` (the ``409``, with SGLang's sentence for those two). Every field beyond those
    the server reads comes back in :func:`prefill_parallel_info`, as the first rank to send it sent it."""
    replay = Replay("PUT", PREFILL_ROUTE_PATH, dumps(dict(rank)))
    key = (PREFILL_ROUTE_PATH, json.dumps([rank.get(name) for name in _IDENTITY]))
    await send_registration(transport, key, replay, timeout, lease)


async def prefill_parallel_info(transport: Transport, *, timeout: float | None = 60.0) -> dict[str, Any]:
    """The deployment's parallel info (``GET /route`` with the four ``-1``), once every rank registered;
    :class:`RankNotRegistered` naming the missing ranks when ``timeout`` runs out first."""
    reply = await _route(transport, _ALL, timeout)
    info: dict[str, Any] = json.loads(reply.body)
    return info


async def prefill_rank_address(
    transport: Transport, dp: int, cp: int, tp: int, pp: int, *, timeout: float | None = 60.0
) -> tuple[str, int]:
    """A prefill rank's ``(rank_ip, rank_port)``, once the deployment is complete and the rank is in it;
    :class:`RankNotRegistered` when the deadline comes first: naming the missing ranks of an incomplete
    deployment, or this rank, of a complete deployment without it."""
    reply = await _route(transport, Coords(dp, cp, tp, pp), timeout)
    if reply.status == 404:
        raise RankNotRegistered((), reply.body.decode(errors="replace"), noun=_NOUN)
    address = json.loads(reply.body)
    return str(address["rank_ip"]), int(address["rank_port"])


async def register_dp_rank(
    transport: Transport, room: int, dp_rank: int, *, timeout: float | None = 60.0
) -> None:
    """Say bootstrap ``room`` went to prefill ``dp_rank`` (kept ``--dp-room-ttl`` to twice that)."""
    body = dumps({"bootstrap_room": room, "dp_rank": dp_rank})
    await calls.request(transport, "POST", PREFILL_REGISTER_ROOM_PATH, Deadline(timeout), body=body)


async def query_dp_ranks(transport: Transport, rooms: Sequence[int], *, wait: float = 0.0) -> dict[int, int]:
    """The dp rank of each of ``rooms`` known; with ``wait``, once all are known or ``wait`` seconds passed."""
    body = dumps({"bootstrap_rooms": list(rooms)})
    deadline = Deadline(wait)
    reply = await transport.call(
        "POST",
        PREFILL_QUERY_ROOMS_PATH,
        deadline,
        params=lambda: {"wait": f"{max(0.0, deadline.remaining()):g}"},
        body=body,
        read_timeout=wait + calls.READ_TIMEOUT,
        parks=wait > 0,
    )
    if reply.status != 200:
        raise transport.error(reply.status, PREFILL_QUERY_ROOMS_PATH, reply.body)
    return {int(room): int(dp_rank) for room, dp_rank in json.loads(reply.body).items()}


async def prefill_status(transport: Transport, *, timeout: float | None = 60.0) -> dict[str, Any]:
    """The deployment as ``GET /prefill`` lists it: ``topology`` (``None`` before the first rank),
    ``expected``, ``registered``, ``complete``, ``ranks`` and ``missing`` (names, at most 1,024)."""
    reply = await calls.request(transport, "GET", PREFILL_LISTING_PATH, Deadline(timeout))
    status: dict[str, Any] = json.loads(reply.body)
    return status


async def _route(transport: Transport, coords: Coords, timeout: float | None) -> Reply:
    """``GET /route`` for ``coords`` (all ``-1``: the parallel info), held until it is answered."""
    query = {
        "prefill_dp_rank": str(coords.dp),
        "prefill_cp_rank": str(coords.cp),
        "target_tp_rank": str(coords.tp),
        "target_pp_rank": str(coords.pp),
    }
    try:
        return await transport.long_poll(
            PREFILL_ROUTE_PATH,
            lambda wait: {**query, "wait": f"{wait:g}"},
            Deadline(timeout),
            _answered(transport),
        )
    except ServerUnavailable as exc:
        if type(exc) is not ServerUnavailable or not exc.detail.startswith(_NOT_READY):
            raise  # no answer, or a server that is stopping or full: not the deployment's incompleteness
        raise await _incomplete(transport, exc.detail) from None


async def _incomplete(transport: Transport, sentence: str) -> RankNotRegistered:
    """The error of a wait that ended before the deployment was complete: the server's ``sentence`` and the
    ranks ``GET /prefill`` lists as missing (the sentence alone if that read fails)."""
    try:
        status = await prefill_status(transport, timeout=_NAMING_READ)
    except BootstrapError:
        return RankNotRegistered((), sentence, noun=_NOUN)
    missing, count = list(status.get("missing") or []), int(status.get("missing_count") or 0)
    if not count:
        return RankNotRegistered((), sentence, noun=_NOUN)  # complete since: the sentence says what was
    named = ", ".join(str(name) for name in missing[:_NAMED])
    more = count - min(len(missing), _NAMED)
    tail = f" and {more} more" if more > 0 else ""
    detail = f"{sentence} Missing {count} of {status.get('expected')} prefill ranks: {named}{tail}."
    return RankNotRegistered((), detail, noun=_NOUN)


def _answered(transport: Transport) -> Callable[[str, Reply], bool]:
    """A ``200`` ends the wait, and a rank's ``404`` once complete; anything else is its error."""

    def answered(path: str, reply: Reply) -> bool:
        if reply.status == 200:
            return True
        if reply.status == 404 and not reply.body.startswith(b"{"):
            return True  # the deployment's own text: complete, and this rank not in it
        raise transport.error(reply.status, path, reply.body)

    return answered
