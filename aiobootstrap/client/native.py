"""The client's calls of aiobootstrap's own routes (``server/faces/native``): whether the server answers,
and the listings of ranks and namespaces. Its watch and leases are ``watch`` and ``leases``.

Each is a function of the transport that :class:`BootstrapClient` makes one of
its methods. These ask each replica once, within a time of their own, and
take no ``timeout``.
"""

from __future__ import annotations

from .._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from ..exceptions import ServerUnavailable
from ..wire.params import listing_query
from ..wire.results import NamespaceSummary, RankListing, decode_listing, decode_namespaces
from ..wire.routes import HEALTH_PATH, NAMESPACES_PATH, RANKS_PATH
from . import calls
from .retry import Deadline
from .transport import Transport

__all__ = ["health", "list_namespaces", "list_ranks"]

_HEALTH_TIME = 10.0
_LISTING_TIME = 60.0
"""The whole time of the calls that ask each replica once and take no ``timeout``."""


async def health(transport: Transport) -> bool:
    """Whether the server (any replica, tried once each) answers ``/health`` right now."""
    try:
        reply = await transport.call(
            "GET", HEALTH_PATH, Deadline(0, overrun=_HEALTH_TIME), read_timeout=_HEALTH_TIME
        )
    except ServerUnavailable:
        return False
    return reply.status == 200


async def list_ranks(
    transport: Transport, *, kind: str = TRANSFER_ENGINE_INFO, role: str = DEFAULT_ROLE
) -> RankListing:
    """Who has registered a record of ``kind`` and ``role`` (without their values), and,
    with a world size, who has not. ``kind`` is ``transfer_engine_info`` or ``parallelism_config``."""
    query = listing_query(kind, role)
    deadline = Deadline(0, overrun=_LISTING_TIME)
    reply = await calls.request(transport, "GET", RANKS_PATH, deadline, params=query or None)
    return decode_listing(reply.body)


async def list_namespaces(transport: Transport) -> list[NamespaceSummary]:
    """Every namespace of the server holding records or parked waits, in order of name (with
    tokens, the ones this client's token covers), whichever namespace this client addresses."""
    reply = await calls.request(transport, "GET", NAMESPACES_PATH, Deadline(0, overrun=_LISTING_TIME))
    return decode_namespaces(reply.body)
