"""Bootstrap rooms: the prefill dp rank each request's room went to (``/register_dp_rank``), asked for by
decode in batches (``/query_dp_ranks``), which ``?wait=S`` holds until every room asked is known.

A room lives at least ``dp_room_ttl`` seconds and is gone by twice that, as
in the engines' server (whose sweep runs every ``T`` and drops entries older
than ``T``): each namespace's rooms of one ``T``-long epoch share one lease of
``2T``, granted by the epoch's first room, so a room needs no timer of its
own and its expiry is the store's (across replicas, and across a restart of
a durable store). Their number per namespace is bounded (``PrefillSettings.dp_room_limit``), as the
rooms kind's cap, which the store checks atomically with the write (``room_cap``).
"""

from __future__ import annotations

import asyncio
import math

from aiohttp import web

from ...._names import DEFAULT_ROLE
from ....core.registry import Registry
from ....exceptions import LeaseNotFound, TooManyOfKind
from ....store import Key
from ....wire.bodies import parse_body
from ....wire.prefill import PREFILL_ROOM
from ....wire.prefill_rooms import encode_rooms, parse_room, parse_rooms
from ....wire.routes import JSON_TYPE
from ...appkeys import CONFIG, REGISTRY
from ...body import read_body
from ...config import ServerConfig
from ..common import namespace_of, wait_seconds
from .settings import PrefillSettings

__all__ = ["ROOM_LEASES", "RoomLeases", "query_dp_ranks", "register_dp_rank", "room_cap"]


def room_key(namespace: str, room: int) -> Key:
    return Key.named(namespace, PREFILL_ROOM, DEFAULT_ROLE, str(room))


class RoomLeases:
    """Each namespace's lease of the current epoch of rooms (this replica's: another grants its own)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._held: dict[str, tuple[int, str]] = {}

    async def lease(self, registry: Registry, namespace: str, *, renew: bool = False) -> str:
        """The lease for a room registered now: the epoch's, granted at its first room (``renew``: again)."""
        loop = asyncio.get_running_loop()
        epoch = math.floor(loop.time() / self.ttl)
        held = self._held.get(namespace)
        if held is not None and held[0] == epoch and not renew:
            return held[1]
        lease = (await registry.grant_lease(namespace, 2 * self.ttl)).id
        # One entry per namespace with rooms: replaced each epoch, so it never grows past the namespaces.
        self._held[namespace] = (epoch, lease)
        return lease


ROOM_LEASES = web.AppKey("prefill_room_leases", RoomLeases)


def room_cap(config: ServerConfig) -> int:
    """The most rooms one namespace keeps (``--dp-room-limit``): the rooms kind's cap (``KindSpec.cap``), which
    the store checks atomically with each write, across replicas, in place of ``--max-ranks``."""
    return config.settings_of(PrefillSettings).dp_room_limit


async def register_dp_rank(request: web.Request) -> web.StreamResponse:
    """``POST /register_dp_rank``: ``{"bootstrap_room": R, "dp_rank": D}``, kept ``dp_room_ttl`` to twice it."""
    app = request.app
    room, dp_rank = parse_room(parse_body(await read_body(request, app[CONFIG])))
    registry, namespace = app[REGISTRY], namespace_of(request)
    key, value, leases = room_key(namespace, room), {"dp_rank": dp_rank}, app[ROOM_LEASES]
    try:
        try:
            await registry.register(key, value, await leases.lease(registry, namespace))
        except LeaseNotFound:
            # The epoch's lease ended early (revoked, or a store restarted without it): a new one.
            await registry.register(key, value, await leases.lease(registry, namespace, renew=True))
    except TooManyOfKind as refused:
        # A new room past the cap (a room registered again replaces itself, so it never is), in the rooms' words.
        raise TooManyOfKind(
            refused.kind,
            refused.cap,
            refused.cap,
            f"The namespace holds {refused.cap} bootstrap rooms, the most it keeps; "
            "each leaves --dp-room-ttl to twice that after its registration.",
        ) from None
    return web.Response(text="OK")


async def query_dp_ranks(request: web.Request) -> web.StreamResponse:
    """``POST /query_dp_ranks``: the dp rank of each room known, ``{"R": D}``; ``?wait=S`` until all are."""
    app = request.app
    rooms = parse_rooms(parse_body(await read_body(request, app[CONFIG])))
    registry, namespace = app[REGISTRY], namespace_of(request)
    keys = [room_key(namespace, room) for room in rooms]
    # One set wait over the rooms' names (the core's): answered when the last missing room arrives.
    records = await registry.wait_keys(keys, wait_seconds(request))
    found = [(room, record.value["dp_rank"]) for room, record in zip(rooms, records, strict=True) if record]
    return web.Response(body=encode_rooms(found), content_type=JSON_TYPE)
