"""A body nested deeper than MAX_NESTING is a 400 on every route and store, and nothing is stored.

orjson parses about 1,000 levels but writes only 255, and the stdlib's fallback
runs out of recursion: before the bound, a deeply nested weights dict was a 500.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._names import TRANSFER_ENGINE_INFO
from aiobootstrap.exceptions import BadRequest
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.server.faces.engine_info import kinds as _kinds
from aiobootstrap.wire import bodies
from aiobootstrap.wire.bodies import MAX_NESTING, parse_body

Client = TestClient[web.Request, web.Application]

LIMIT = MAX_NESTING
_PREFIXES = itertools.count()


def nested(levels: int, leaf: Any = 1) -> Any:
    """A value nesting ``levels`` objects and arrays (alternating), ``leaf`` innermost."""
    value = leaf
    for level in range(levels):
        value = {"k": value} if level % 2 else [value]
    return value


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


Route = tuple[str, str, Callable[[Any], dict[str, Any]], int]


def _register_route(kind: _kinds.RecordKind) -> Route:
    if kind.name == TRANSFER_ENGINE_INFO:

        def info(inner: Any) -> dict[str, Any]:
            return {"rank": 0, kind.field: {"session_id": "s", "weights_info_dict": {"w": inner}}}

        return ("PUT", kind.register_path, info, 3)
    return ("PUT", kind.register_path, lambda inner: {"rank": 0, kind.field: {"c": inner}}, 2)


# Each route that takes a JSON body (every kind's register, the encoder URL
# routes): a body for it holding `inner`, and how many levels of objects the
# body puts around `inner`.
ROUTES: dict[str, Route] = {
    **{f"register {kind.name}": _register_route(kind) for kind in _kinds.KINDS},
    "register encoder url": (
        "POST",
        "/register_encoder_url",
        lambda inner: {"url": "http://e:1", "x": inner},
        1,
    ),
    "unregister encoder url": (
        "DELETE",
        "/unregister_encoder_url",
        lambda inner: {"url": "http://e:1", "x": inner},
        1,
    ),
}


@pytest.fixture(params=["memory", "file", "redis"])
async def any_client(aiohttp_client: Any, request: pytest.FixtureRequest, tmp_path: Path) -> Client:
    """A client of the app over each store."""
    if request.param == "file":
        config = ServerConfig(state_file=str(tmp_path / "state"))
    elif request.param == "redis":
        redis = request.getfixturevalue("shared_redis")
        config = ServerConfig(store=redis.url, store_prefix=f"nest{next(_PREFIXES)}")
    else:
        config = ServerConfig()
    client: Client = await aiohttp_client(create_app(config))
    return client


async def version(client: Client, namespace: str) -> int:
    return await client.app[REGISTRY].store.version(namespace)


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("namespace", ["default", "blue"])
async def test_a_body_one_level_too_deep_is_a_400_and_stores_nothing(
    any_client: Client, route: str, namespace: str
) -> None:
    """One level past the bound: 400 naming it, the version untouched; at the bound: accepted."""
    method, path, body, wrapping = ROUTES[route]
    prefix = "" if namespace == "default" else f"/ns/{namespace}"
    before = await version(any_client, namespace)
    too_deep = body(nested(LIMIT - wrapping + 1))
    assert depth(too_deep) == LIMIT + 1
    async with any_client.request(method, prefix + path, data=json.dumps(too_deep)) as reply:
        assert reply.status == 400
        assert await reply.json() == {
            "detail": f"The request body nests objects and arrays more than {LIMIT} levels deep."
        }
    assert await version(any_client, namespace) == before
    at_limit = body(nested(LIMIT - wrapping))
    assert depth(at_limit) == LIMIT
    async with any_client.request(method, prefix + path, data=json.dumps(at_limit)) as reply:
        assert reply.status == 200


@pytest.mark.parametrize("levels", [300, 1000, 1020, 5000])
async def test_a_thousand_levels_is_a_400_not_a_500(any_client: Client, levels: int) -> None:
    """What once parsed and then could not be written (a 500) is refused at the parser."""
    weights = '{"w":' + nested_text(levels) + "}"
    text = '{"rank":0,"transfer_engine_info":{"session_id":"s","weights_info_dict":' + weights + "}}"
    async with any_client.put("/register_transfer_engine_info", data=text) as reply:
        assert reply.status == 400
    async with any_client.get("/get_transfer_engine_info?rank=0") as reply:
        assert reply.status == 404


async def test_a_registration_at_the_bound_reads_back_whole(any_client: Client) -> None:
    """The deepest body accepted is served back by a get, a batch get and form=object."""
    inner = nested(LIMIT - 3, "leaf")
    body = {"rank": 0, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {"w": inner}}}
    async with any_client.put("/register_transfer_engine_info", json=body) as reply:
        assert reply.status == 200
    for query in ("?rank=0", "?rank=0&form=object"):
        async with any_client.get("/get_transfer_engine_info" + query) as reply:
            assert reply.status == 200
            assert "leaf" in await reply.text()
    async with any_client.get("/get_transfer_engine_info_batch?ranks=0") as reply:
        assert reply.status == 200


def nested_text(levels: int, leaf: str = "1") -> str:
    """The JSON text of ``nested(levels)``, written without recursion (json.dumps stops near 1,000)."""
    opens = "".join('{"k":' if level % 2 else "[" for level in reversed(range(levels)))
    closes = "".join("}" if level % 2 else "]" for level in range(levels))
    return opens + leaf + closes


# -- the check itself --------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "[[[[[[[[[[[["}',
        '{"a": "]]]]", "b": [[[]]]}',
        '{"a": "\\"[[[[", "b": [1]}',
        '{"a": "{\\\\", "b": {"c": "}"}}',
        '{"a": [], "b": {}, "c": [{}], "d": ""}',
        '{"é": "[x]", "b": [[["\\u005b"]]]}',
    ],
)
@pytest.mark.parametrize("limit", [1, 2, 3, 4])
def test_the_byte_check_and_the_value_walk_agree(text: str, limit: int) -> None:
    """Strings holding brackets, quotes and escapes never fool the bound either way."""
    value = json.loads(text)
    expected = depth(value) <= limit
    body = text.encode()
    fast = bodies._bytes_nest_within(body, limit)
    assert fast in (None, expected)
    assert bodies._nests_within(value, limit) is expected


def test_a_string_of_brackets_is_not_nesting() -> None:
    """A body whose strings are full of brackets is as deep as its structure, not its text."""
    body = json.dumps({"rank": 0, "x": "[" * 500 + "{" * 500}).encode()
    assert parse_body(body)["rank"] == 0
    deep = json.dumps({"x": "]" * 70, "y": nested(LIMIT)}).encode()
    with pytest.raises(BadRequest):
        parse_body(deep)


def test_brackets_in_strings_cannot_hide_depth() -> None:
    """Closing brackets in strings before the deep part, and opening ones after, still count as nothing."""
    inner: Any = 1
    for _ in range(LIMIT):
        inner = ["]", inner, "["]
    body = json.dumps({"x": inner}).encode()
    with pytest.raises(BadRequest):
        parse_body(body)
