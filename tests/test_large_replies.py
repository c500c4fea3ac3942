"""Replies too large to copy per getter are written apart from their headers, unchanged on the wire."""

from __future__ import annotations

import asyncio
import json

from aiobootstrap.server.app import create_app
from aiobootstrap.server.config import ServerConfig
from aiobootstrap.server.fastpath.gets import SEPARATE_BODY_OVER


def _weights(tensors: int) -> dict[str, list[int]]:
    return {f"layers.{i}.mlp.weight": [140234567890123 + i, 8388608, 2] for i in range(tensors)}


async def _register(client, rank: int, weights: dict[str, list[int]]) -> None:
    body = {"rank": rank, "transfer_engine_info": {"session_id": f"s{rank}", "weights_info_dict": weights}}
    response = await client.put("/register_transfer_engine_info", json=body)
    assert response.status == 200


async def test_large_get_reply_is_the_same_json_with_its_length(aiohttp_client):
    """A get reply past the separate-body threshold arrives whole, as JSON, with a Content-Length."""
    client = await aiohttp_client(create_app(ServerConfig()))
    weights = _weights(10_000)
    await _register(client, 0, weights)
    response = await client.get("/get_transfer_engine_info", params={"rank": "0"})
    body = await response.read()
    assert len(body) > SEPARATE_BODY_OVER
    assert response.status == 200
    assert response.content_type == "application/json"
    assert int(response.headers["Content-Length"]) == len(body)
    assert json.loads(body) == {
        "rank": 0,
        "remote_instance_transfer_engine_info": ["s0", weights],
        "version": 1,
    }


async def test_large_batch_reply_is_the_same_json_with_its_length(aiohttp_client):
    """A batch reply past the threshold holds every rank, with a Content-Length."""
    client = await aiohttp_client(create_app(ServerConfig()))
    weights = _weights(4_000)
    for rank in range(3):
        await _register(client, rank, weights)
    response = await client.get("/get_transfer_engine_info_batch", params={"ranks": "0-2"})
    body = await response.read()
    assert len(body) > SEPARATE_BODY_OVER
    assert response.status == 200
    assert int(response.headers["Content-Length"]) == len(body)
    payload = json.loads(body)
    assert [info["rank"] for info in payload["infos"]] == [0, 1, 2]
    assert all(info["remote_instance_transfer_engine_info"][1] == weights for info in payload["infos"])


async def test_two_getters_share_one_large_reply(aiohttp_client):
    """Concurrent getters of one large reply both receive it whole (they share one bytes object)."""
    client = await aiohttp_client(create_app(ServerConfig()))
    weights = _weights(10_000)
    await _register(client, 5, weights)

    async def fetch():
        response = await client.get("/get_transfer_engine_info", params={"rank": "5"})
        assert response.status == 200
        return await response.read()

    first, second = await asyncio.gather(fetch(), fetch())
    assert first == second
    assert json.loads(first)["remote_instance_transfer_engine_info"][1] == weights
