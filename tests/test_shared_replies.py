"""Every form of a get, and the batch, share one reply among the getters woken together."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from aiobootstrap.server.app import REGISTRY
from aiobootstrap.server.faces import records
from aiobootstrap.server.fastpath import batches

from .helpers.registry import registration
from .helpers.waits import GUARD, until

WAITERS = 20


def _counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls: list[int] = []
    made: Callable[..., bytes] = getattr(module, name)

    def counted(*args: Any) -> bytes:
        calls.append(1)
        return made(*args)

    monkeypatch.setattr(module, name, counted)
    return calls


async def _woken_together(client: Any, path: str, params: dict[str, str]) -> list[bytes]:
    waits = [
        asyncio.create_task(client.get(path, params={**params, "wait": str(GUARD)})) for _ in range(WAITERS)
    ]
    await until(lambda: client.app[REGISTRY].parked == WAITERS)
    assert (await client.put("/register_transfer_engine_info", json=registration(0))).status == 200
    replies = await asyncio.wait_for(asyncio.gather(*waits), GUARD)
    assert [reply.status for reply in replies] == [200] * WAITERS
    return [await reply.read() for reply in replies]


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_form_object_waiters_share_one_encoded_reply(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 waits with form=object woken by one registration: the reply is encoded once, for all.

    Fails before issue 18: each getter encoded its own copy (500 of a 4 MiB record held 2 GiB).
    """
    dumps = _counting(monkeypatch, records, "dumps")
    bodies = await _woken_together(client, "/get_transfer_engine_info", {"rank": "0", "form": "object"})
    assert len(set(bodies)) == 1
    assert len(dumps) == 1


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_batch_waiters_share_one_reply(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """20 batch waits on one set woken by one registration: the batch reply is joined once, for all.

    Fails before issue 18: each getter joined its own copy of the whole batch.
    """
    joins = _counting(monkeypatch, batches, "encode_items")
    bodies = await _woken_together(client, "/get_transfer_engine_info_batch", {"ranks": "0"})
    assert len(set(bodies)) == 1
    assert len(joins) == 1


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_a_batch_made_of_older_records_is_not_served_again(client: Any) -> None:
    """A batch reply is shared only while its records are the ones it was made of."""
    assert (await client.put("/register_transfer_engine_info", json=registration(0, "first"))).status == 200
    first = await client.get("/get_transfer_engine_info_batch", params={"ranks": "0"})
    assert b"first" in await first.read()
    assert (await client.put("/register_transfer_engine_info", json=registration(0, "second"))).status == 200
    second = await client.get("/get_transfer_engine_info_batch", params={"ranks": "0"})
    assert b"second" in await second.read()
