"""The fast path's one rule (``fastpath/eligible.py``) and its shared headers, seen from an embedding app.

Mounted under another app (``add_subapp``), or given a hook or a middleware
of an embedder's, every reply takes aiohttp's own way, so that what the
embedder adds is in each: a registration, a get, a woken get, a woken watch
long-poll, a lease keepalive. A pre-built reply an access log reads shows
the same headers as aiohttp's own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.typedefs import Handler

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.appkeys import HISTORY, REGISTRY
from aiobootstrap.server.fastpath.eligible import ELIGIBILITY

from .helpers.registry import register_in
from .helpers.waits import GUARD, until

REGISTER = "/register_transfer_engine_info"
GET = "/get_transfer_engine_info"
BODY = {"rank": 0, "transfer_engine_info": {"session_id": "10.0.0.1:1", "weights_info_dict": {}}}


async def _every_fast_reply(client: Any, app: web.Application, prefix: str = "") -> dict[str, Any]:
    """The headers of a registration, a get, a woken get, a woken watch long-poll and a lease keepalive."""
    registry, history = app[REGISTRY], app[HISTORY]
    seen: dict[str, Any] = {}
    async with client.put(prefix + REGISTER, json=BODY) as reply:
        assert reply.status == 200
        seen["registration"] = reply.headers
    async with client.get(prefix + GET + "?rank=0") as reply:
        assert reply.status == 200
        seen["get"] = reply.headers
    woken = asyncio.ensure_future(client.get(prefix + GET + "?rank=1&wait=30"))
    await until(lambda: registry.parked == 1)
    await register_in(registry, 1, "s", {})
    async with asyncio.timeout(GUARD):
        async with await woken as reply:
            assert reply.status == 200
            seen["woken get"] = reply.headers
    async with client.get(prefix + "/watch?after=0") as reply:
        version = (await reply.json())["version"]
    watch = asyncio.ensure_future(client.get(prefix + f"/watch?after={version}&wait=30"))
    await until(lambda: history.watchers == 1)
    await register_in(registry, 2, "s", {})
    async with asyncio.timeout(GUARD):
        async with await watch as reply:
            assert reply.status == 200
            assert [change["rank"] for change in (await reply.json())["changes"]] == [2]
            seen["woken watch"] = reply.headers
    async with client.post(prefix + "/leases", json={"ttl": 30}) as reply:
        lease = (await reply.json())["lease"]
    async with client.post(prefix + f"/leases/{lease}/keepalive") as reply:
        assert reply.status == 200
        seen["keepalive"] = reply.headers
    return seen


async def test_mounted_under_another_app_every_reply_carries_the_outer_apps_header(
    aiohttp_client: Any,
) -> None:
    """add_subapp: the outer app's on_response_prepare is in a woken watch and a keepalive too, not only in gets."""

    async def outer_stamp(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["X-Outer"] = "yes"

    outer = web.Application()
    outer.on_response_prepare.append(outer_stamp)
    inner = create_app(ServerConfig())
    outer.add_subapp("/inner", inner)
    client = await aiohttp_client(outer)
    seen = await _every_fast_reply(client, inner, "/inner")
    assert {name: headers.get("X-Outer") for name, headers in seen.items()} == dict.fromkeys(seen, "yes")
    # The app alone could have pre-built its replies: only the mounting turned the fast path off.
    assert inner[ELIGIBILITY].allowed


async def test_an_embedders_hook_or_middleware_turns_the_fast_path_off(aiohttp_client: Any) -> None:
    """A prepare hook or a middleware added to create_app's app is in every reply, the header set after the handler too."""

    @web.middleware
    async def tag(request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        response.headers["X-Tag"] = "after"
        return response

    app = create_app(ServerConfig())
    app.middlewares.append(tag)
    client = await aiohttp_client(app)
    seen = await _every_fast_reply(client, app)
    assert not app[ELIGIBILITY].allowed
    assert {name: headers.get("X-Tag") for name, headers in seen.items()} == dict.fromkeys(seen, "after")


async def test_the_app_alone_pre_builds_its_replies(aiohttp_client: Any) -> None:
    """With its own hooks only, the fast path is on, and the same five replies come back whole."""
    app = create_app(ServerConfig())
    client = await aiohttp_client(app)
    seen = await _every_fast_reply(client, app)
    assert app[ELIGIBILITY].allowed
    assert all(headers["X-Aiobootstrap-Boot"] for headers in seen.values())


ACCESS_FORMAT = "%s|%b|%{Content-Type}o|%{Content-Length}o|%{X-Aiobootstrap-Boot}o|%{Date}o|%{Server}o"


@pytest.mark.parametrize("fast", [True, False], ids=["pre-built", "aiohttp"])
async def test_an_access_log_reads_the_same_headers_of_every_reply(
    caplog: pytest.LogCaptureFixture, fast: bool
) -> None:
    """Each pre-built reply's headers (for an access log's format) are those its bytes carry, as aiohttp's are."""
    logger = logging.getLogger("test.fastpath.access")
    caplog.set_level(logging.INFO, logger=logger.name)

    async def nothing(request: web.Request, response: web.StreamResponse) -> None:
        pass

    app = create_app(ServerConfig())
    if not fast:
        app.on_response_prepare.append(nothing)  # any other hook: aiohttp's own replies
    runner = web.AppRunner(app, access_log=logger, access_log_format=ACCESS_FORMAT)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{port}") as client:
            seen = await _every_fast_reply(client, app)
    finally:
        await runner.cleanup()
    assert app[ELIGIBILITY].allowed is fast

    def lines() -> list[list[str]]:
        return [r.getMessage().split("|") for r in caplog.records if r.name == logger.name]

    await until(lambda: len(lines()) == 7)  # the five replies, a first watch and a grant
    for status, sent, content_type, length, boot, date, server in lines():
        assert status == "200"
        assert "-" not in (content_type, length, boot, date, server)
        assert int(sent) >= int(length)
    logged = {int(line[3]) for line in lines()}
    assert {int(headers["Content-Length"]) for headers in seen.values()} <= logged
