"""The client believes no reply it has not checked: the rank it asked for, and every field's type."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from aiobootstrap import BootstrapClient, UnexpectedReply, _json
from aiobootstrap.wire.params import parse_ranks
from aiobootstrap.wire.results import (
    decode_batch,
    decode_config,
    decode_config_batch,
    decode_info,
    decode_listing,
    decode_version_header,
)
from aiobootstrap.wire.routes import BATCH_PATH, GET_PATH

from .helpers.waits import GUARD

ServerFactory = Callable[..., Awaitable[TestServer]]


def _get_reply(rank: Any = 3, info: Any = None, version: Any = 1) -> bytes:
    info = ["s", {}] if info is None else info
    return _json.dumps({"rank": rank, "remote_instance_transfer_engine_info": info, "version": version})


def test_a_reply_for_another_rank_is_not_believed() -> None:
    """A well-formed get reply for rank 99 to a get of rank 3 is an UnexpectedReply naming both."""
    with pytest.raises(UnexpectedReply, match="rank 3 with rank 99"):
        decode_info(_get_reply(rank=99), 3)
    assert decode_info(_get_reply(rank=3), 3).session_id == "s"


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (_get_reply(info=[["x"], {}]), "session_id is ['x'], not a string"),
        (_get_reply(info=[7, {}]), "session_id is 7, not a string"),
        (_get_reply(info=["s", []]), "weights_info_dict is [], not a JSON object"),
        (_get_reply(info=["s", {}, "more"]), "neither"),
        (_get_reply(info=["s"]), "neither"),
        (_get_reply(info="s"), "neither"),
        (_get_reply(info={"session_id": ["x"], "backend": "nixl"}), "session_id"),
        (_get_reply(info={"weights_info_dict": "w", "backend": "nixl"}), "weights_info_dict"),
        (_get_reply(version=True), "version is True, not a non-negative integer"),
        (_get_reply(version="1"), "version is '1'"),
        (_get_reply(version=-1), "version is -1"),
        (_get_reply(version=1.5), "version is 1.5"),
        (_get_reply(rank=True), "rank is True"),
        (_get_reply(rank="3"), "rank is '3'"),
        (b'{"remote_instance_transfer_engine_info": ["s", {}], "version": 1}', "no rank"),
        (b"[]", "not a JSON object"),
    ],
)
def test_a_get_reply_of_the_wrong_types_is_not_believed(reply: bytes, says: str) -> None:
    """session_id a string, weights_info_dict an object, rank and version integers (not true, not text)."""
    with pytest.raises(UnexpectedReply, match="not a transfer engine info reply") as caught:
        decode_info(reply, 3)
    assert says in str(caught.value)


def test_a_message_shows_a_huge_wrong_value_cut_short() -> None:
    """A megabyte where a session id should be is shown as a few dozen characters."""
    with pytest.raises(UnexpectedReply) as caught:
        decode_info(_get_reply(info=[["x" * 1_000_000], {}]), 3)
    assert len(str(caught.value)) < 200


def _batch(*ranks: Any) -> bytes:
    items = [
        {"rank": rank, "remote_instance_transfer_engine_info": ["s", {}], "version": 1} for rank in ranks
    ]
    return _json.dumps({"infos": items, "version": 1})


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (_batch(0, 1, 99), "rank 99, which it did not ask for"),
        (_batch(0, 1, 1), "a rank twice"),
        (_batch(0), "1 of them missing"),
        (_batch(0, 1, True), "rank is True"),
    ],
)
def test_a_batch_reply_must_hold_each_rank_asked_once(reply: bytes, says: str) -> None:
    """A batch 200 holds exactly the ranks asked, once each: no stray, no repeat, none left out."""
    with pytest.raises(UnexpectedReply) as caught:
        decode_batch(reply, parse_ranks("0-1"))
    assert says in str(caught.value)
    assert sorted(decode_batch(_batch(1, 0), parse_ranks("0-1"))) == [0, 1]


@pytest.mark.parametrize(
    "item",
    [
        {"rank": 5, "parallelism_config": {}, "version": 1},
        {"rank": 0, "parallelism_config": [], "version": 1},
        {"rank": 0, "parallelism_config": {}, "version": True},
    ],
)
def test_a_config_batch_reply_is_checked_like_an_info_batch(item: dict[str, Any]) -> None:
    """Parallelism config batches: the ranks asked, a config object, an integer version."""
    with pytest.raises(UnexpectedReply):
        decode_config_batch(_json.dumps({"configs": [item], "version": 1}), [0])


@pytest.mark.parametrize("header", ["true", "-1", "1.0", "x"])
def test_a_version_header_that_is_not_a_version_is_not_believed(header: str) -> None:
    """X-Aiobootstrap-Version absent is 0 (an older server); present, it must be a version."""
    assert decode_version_header(None) == 0
    with pytest.raises(UnexpectedReply):
        decode_config(b"{}", 0, header)


_LISTED = {"rank": 0, "session_id": "s", "version": 1, "registered_at": 0.0, "age": 1.0}


@pytest.mark.parametrize(
    "change",
    [
        {"version": True},
        {"world_size": "8"},
        {"missing": [True]},
        {"missing": "1"},
        {"missing_ranks": 3},
        {"missing_ranks": "x"},
        {"waiters": -1},
        {"kind": 1},
        {"ranks": [{**_LISTED, "session_id": ["x"]}]},
        {"ranks": [{**_LISTED, "version": "1"}]},
        {"ranks": [{**_LISTED, "registered_at": True}]},
        {"ranks": [{**_LISTED, "backend": 1}]},
    ],
)
def test_a_listing_of_the_wrong_types_is_not_believed(change: dict[str, Any]) -> None:
    """Every field of a listing has its type: counts are integers, names strings, times numbers."""
    listing = {"version": 1, "world_size": None, "missing": None, "ranks": [_LISTED]}
    assert decode_listing(_json.dumps(listing)).ranks[0].session_id == "s"
    with pytest.raises(UnexpectedReply, match="not a rank listing"):
        decode_listing(_json.dumps({**listing, **change}))


def _liar(body: bytes) -> web.Application:
    """A server that answers every get with ``body``."""

    async def answer(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get(GET_PATH, answer)
    app.router.add_get(BATCH_PATH, answer)
    return app


@pytest.mark.parametrize(
    "body", [_get_reply(rank=99), _get_reply(info=[["x"], {}]), _get_reply(version=True)]
)
async def test_the_client_raises_on_a_reply_it_cannot_believe(
    aiohttp_server: ServerFactory, body: bytes
) -> None:
    """get(3) against a server that answers rank 99, a list session id or version true raises at once."""
    server = await aiohttp_server(_liar(body))
    async with BootstrapClient(f"http://127.0.0.1:{server.port}") as client:
        with pytest.raises(UnexpectedReply):
            await client.get(3, timeout=GUARD)


async def test_get_many_raises_on_a_batch_with_a_stray_rank(aiohttp_server: ServerFactory) -> None:
    """get_many([0, 1]) against a server whose 200 holds rank 99 too raises, never returns rank 99."""
    server = await aiohttp_server(_liar(_batch(0, 1, 99)))
    async with BootstrapClient(f"http://127.0.0.1:{server.port}") as client:
        with pytest.raises(UnexpectedReply, match="rank 99"):
            await client.get_many([0, 1], timeout=GUARD)
