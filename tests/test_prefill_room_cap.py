"""The bootstrap rooms' bound is the rooms kind's cap (``--dp-room-limit``, declared by the prefill face as
``KindSpec.cap``), checked by the store atomically with each write (issue 41, item 9; issue 37's limits)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiobootstrap import ServerConfig
from aiobootstrap.server.faces.prefill.settings import PrefillSettings


def _rooms(limit: int, **options: Any) -> ServerConfig:
    return ServerConfig(settings=(PrefillSettings(dp_room_limit=limit),), **options)


@pytest.mark.parametrize("config", [_rooms(5, max_ranks=3)])
async def test_rooms_are_capped_by_the_room_limit_not_the_rank_limit(client: Any) -> None:
    """With --max-ranks 3 and --dp-room-limit 5, five rooms are kept, and the sixth is refused in the rooms'
    words (not "give the server a world size or a higher rank limit")."""
    for room in range(5):
        reply = await client.post("/register_dp_rank", json={"bootstrap_room": room, "dp_rank": 0})
        assert reply.status == 200, await reply.text()
    refused = await client.post("/register_dp_rank", json={"bootstrap_room": 5, "dp_rank": 0})
    assert refused.status == 409
    detail = (await refused.json())["detail"]
    assert detail.startswith("The namespace holds 5 bootstrap rooms, the most it keeps"), detail
    assert "rank limit" not in detail


@pytest.mark.parametrize("config", [_rooms(10)])
async def test_rooms_registered_at_once_never_pass_the_cap(client: Any) -> None:
    """Forty new rooms at once against a cap of 10: exactly 10 are kept (the store counts with the write;
    a check before the write let concurrent ones through)."""
    replies = await asyncio.gather(
        *(client.post("/register_dp_rank", json={"bootstrap_room": room, "dp_rank": 0}) for room in range(40))
    )
    assert sorted(reply.status for reply in replies) == [200] * 10 + [409] * 30
    known = await (await client.post("/query_dp_ranks", json={"bootstrap_rooms": list(range(40))})).json()
    assert len(known) == 10
