"""Numbers in bodies and parameters: what is refused with a 400, what is kept exact."""

from __future__ import annotations

from typing import Any

import pytest

from aiobootstrap import _json

from .helpers.registry import registration


@pytest.fixture(params=["orjson", "stdlib"])
def codec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with orjson when it is installed, and as if it were not."""
    if request.param == "orjson":
        pytest.importorskip("orjson", reason="the fast extra is not installed")
    else:
        monkeypatch.setattr(_json, "orjson", None)
    return str(request.param)


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"1E+999"])
async def test_a_number_too_large_for_a_float_is_refused_and_stores_nothing(
    client: Any, codec: str, number: bytes
) -> None:
    """A number that overflows to infinity is a 400, never stored as null or Infinity."""
    body = (
        b'{"rank": 1, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {"x": %s}}}' % number
    )
    response = await client.put("/register_transfer_engine_info", data=body)
    assert response.status == 400
    assert "JSON" in (await response.json())["detail"]
    assert (await client.get("/get_transfer_engine_info?rank=1")).status == 404


async def test_finite_floats_still_register(client: Any, codec: str) -> None:
    """Large but finite floats and long integers are stored and returned unchanged."""
    weights = {"big": 1.7976931348623157e308, "tiny": 1e-320, "long": 2**70}
    response = await client.put("/register_transfer_engine_info", json=registration(1, weights=weights))
    assert response.status == 200
    reply = await (await client.get("/get_transfer_engine_info?rank=1")).json()
    assert reply["remote_instance_transfer_engine_info"][1] == weights


@pytest.mark.parametrize("wait", ["1_0", " 1", "1 ", "\u0663", "\uff11", "+1", "0x1"])
async def test_wait_is_plain_ascii_decimal_like_the_integers(client: Any, wait: str) -> None:
    """wait= refuses what float() alone would take (1_0, other scripts' digits, spaces) with a 400."""
    await client.put("/register_transfer_engine_info", json=registration(1))
    response = await client.get("/get_transfer_engine_info", params={"rank": "1", "wait": wait})
    assert response.status == 400
    assert "wait" in (await response.json())["detail"]


@pytest.mark.parametrize("wait", ["0", "1", "0.5", ".5", "5.", "1e0", "2E-1", "300"])
async def test_wait_takes_every_ordinary_decimal(client: Any, wait: str) -> None:
    """Ordinary decimal and exponent forms of wait= are accepted."""
    await client.put("/register_transfer_engine_info", json=registration(1))
    response = await client.get("/get_transfer_engine_info", params={"rank": "1", "wait": wait})
    assert response.status == 200
