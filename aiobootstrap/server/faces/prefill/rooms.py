"""Bootstrap rooms: the prefill dp rank each request's room went to (``/register_dp_rank``), asked for by
decode in batches (``/query_dp_ranks``), which ``?wait=S`` holds until every room asked is known.

A room lives at least ``dp_room_ttl`` seconds and is gone by twice that, as
in the engines' server (whose sweep runs every ``T`` and drops entries older
than ``T``): each namespace's rooms of one ``T``-long epoch share one lease of
``2T``, granted by the epoch's first room, so a room needs no timer of its
own and its expiry is the store's (across replicas, and across a restart of
a durable store). Their number per namespace is bounded (``ServerConfig.dp_room_limit``).
"""

from __future__ import annotations

import asyncio
import math

from aiohttp import web

from .... import wire
from ...._names import DEFAULT_ROLE
from ....core.registry import Registry
from ....exceptions import LeaseNotFound, TooManyRanks
from ....store import Key
from ....wire.prefill import PREFILL_ROOM, encode_rooms, parse_room, parse_rooms
from ...appkeys import CONFIG, REGISTRY
from ...body import read_body
from ..common import namespace_of, wait_seconds

__all__ = ["ROOM_LEASES", "RoomLeases", "query_dp_ranks", "register_dp_rank"]


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


async def register_dp_rank(request: web.Request) -> web.StreamResponse:
    """``POST /register_dp_rank``: ``{"bootstrap_room": R, "dp_rank": D}``, kept ``dp_room_ttl`` to twice it."""
    app = request.app
    room, dp_rank = parse_room(wire.parse_body(await read_body(request, app[CONFIG])))
    registry, namespace = app[REGISTRY], namespace_of(request)
    key, limit = room_key(namespace, room), app[CONFIG].dp_room_limit
    # A room registered again replaces itself, so only a new one is refused at the limit.
    if (
        await registry.count(namespace, PREFILL_ROOM, DEFAULT_ROLE) >= limit
        and await registry.get(key) is None
    ):
        raise TooManyRanks(
            f"The namespace holds {limit} bootstrap rooms, the most it keeps; "
            "each leaves --dp-room-ttl to twice that after its registration."
        )
    leases = app[ROOM_LEASES]
    lease = await leases.lease(registry, namespace)
    try:
        await registry.register(key, {"dp_rank": dp_rank}, lease)
    except LeaseNotFound:
        # The epoch's lease ended early (revoked, or a store restarted without it): a new one.
        await registry.register(
            key, {"dp_rank": dp_rank}, await leases.lease(registry, namespace, renew=True)
        )
    return web.Response(text="OK")


async def query_dp_ranks(request: web.Request) -> web.StreamResponse:
    """``POST /query_dp_ranks``: the dp rank of each room known, ``{"R": D}``; ``?wait=S`` until all are."""
    app = request.app
    rooms = parse_rooms(wire.parse_body(await read_body(request, app[CONFIG])))
    registry, namespace = app[REGISTRY], namespace_of(request)
    keys = [room_key(namespace, room) for room in rooms]
    records = await registry.get_many(keys)
    wait = wait_seconds(request)
    if wait > 0 and None in records:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        # One missing room waited for at a time: a wait holds one waitlist, however many rooms it asks.
        for index, key in enumerate(keys):
            left = deadline - loop.time()
            if records[index] is None and left > 0:
                records[index] = await registry.wait(key, left)
        if None in records:
            records = await registry.get_many(keys)  # those that came while an earlier one was waited for
    found = [(room, record.value["dp_rank"]) for room, record in zip(rooms, records, strict=True) if record]
    return web.Response(body=encode_rooms(found), content_type=wire.JSON_TYPE)
