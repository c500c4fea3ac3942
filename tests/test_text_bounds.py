"""What a store keys or writes is bounded and encodable, checked at the edge on every store."""

from __future__ import annotations

from typing import Any

import pytest

from aiobootstrap import Registry
from aiobootstrap._names import MAX_ROLE_LENGTH, TRANSFER_ENGINE_INFO
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.store import Key
from aiobootstrap.store.redis import RedisStore

from .helpers.registry import stored_count

ENGINE = "/register_transfer_engine_info"
INFO = '"transfer_engine_info":{"session_id":"s","weights_info_dict":{}}'


@pytest.mark.parametrize(
    "body",
    [
        '{"rank":1,"role":"\\ud800",' + INFO + "}",
        '{"rank":1,"transfer_engine_info":{"session_id":"\\udfff","weights_info_dict":{}}}',
        '{"rank":1,"transfer_engine_info":{"session_id":"s","weights_info_dict":{"\\ud800x":1}}}',
    ],
    ids=["role", "value", "key"],
)
async def test_a_lone_surrogate_anywhere_in_a_registration_is_400(client: Any, body: str) -> None:
    """A lone surrogate escape in the role, a value or a key: 400 with a detail, nothing stored.

    Fails before issue 18: the memory store kept it (200), and Redis refused it deeper down.
    """
    reply = await client.put(ENGINE, data=body.encode(), headers={"Content-Type": "application/json"})
    assert reply.status == 400
    assert "Unicode" in (await reply.json())["detail"]
    assert await stored_count(client.app[REGISTRY]) == 0


async def test_a_surrogate_pair_is_one_character_and_is_kept(client: Any) -> None:
    """Two surrogate escapes that make one character are valid text: stored, read back whole."""
    body = '{"rank":0,"transfer_engine_info":{"session_id":"\\ud83d\\ude00","weights_info_dict":{}}}'
    reply = await client.put(ENGINE, data=body.encode(), headers={"Content-Type": "application/json"})
    assert reply.status == 200
    got = await client.get("/get_transfer_engine_info", params={"rank": "0"})
    assert (await got.json())["remote_instance_transfer_engine_info"][0] == "\U0001f600"


async def test_a_lone_surrogate_in_an_encoder_url_is_400(client: Any) -> None:
    """The encoder URL body is held to the same rule."""
    reply = await client.post(
        "/register_encoder_url",
        data=b'{"url":"http://e\\udc80"}',
        headers={"Content-Type": "application/json"},
    )
    assert reply.status == 400


async def test_a_role_longer_than_the_limit_is_400_in_a_body_and_in_a_query(client: Any) -> None:
    """A role of MAX_ROLE_LENGTH characters is kept; one longer is 400, registered or asked for.

    Fails before issue 18: any length was stored, and carried on every Redis feed entry.
    """
    longest = "r" * MAX_ROLE_LENGTH
    fine = await client.put(ENGINE, json={"rank": 0, "role": longest, **_info()})
    assert fine.status == 200
    too_long = longest + "r"
    refused = await client.put(ENGINE, json={"rank": 0, "role": too_long, **_info()})
    assert refused.status == 400
    assert str(MAX_ROLE_LENGTH) in (await refused.json())["detail"]
    asked = await client.get("/get_transfer_engine_info", params={"rank": "0", "role": too_long})
    assert asked.status == 400


def _info() -> dict[str, Any]:
    return {"transfer_engine_info": {"session_id": "s", "weights_info_dict": {}}}


async def test_the_redis_store_refuses_a_role_too_long_for_its_feed(redis_server: Any) -> None:
    """Whoever writes (an embedder too), a Redis feed entry carries a bounded role: a longer one is refused.

    Fails before issue 18: a 256 KiB role went on each of 10,000 feed entries.
    """
    store = RedisStore(redis_server.url, timeout=1.0)
    await store.open(Registry(store))
    try:
        with pytest.raises(ValueError, match=str(MAX_ROLE_LENGTH)):
            await store.put(Key("default", TRANSFER_ENGINE_INFO, "r" * (MAX_ROLE_LENGTH + 1), 0), {"x": 1})
        assert redis_server.command("XLEN", "{aiobootstrap}:feed") == 0
    finally:
        await store.close()
