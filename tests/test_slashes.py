"""Trailing slashes: ``307`` to the route without it, as the engines' FastAPI servers answer."""

from __future__ import annotations

import asyncio

import pytest
import requests

from aiobootstrap import ThreadedBootstrapServer, create_app

from .helpers.registry import registration
from .helpers.waits import GUARD


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/get_transfer_engine_info/?rank=0"),
        ("PUT", "/register_transfer_engine_info/"),
        ("POST", "/register_encoder_url/"),
        ("DELETE", "/unregister_encoder_url/"),
        ("GET", "/list_encoder_urls/?after=0&wait=0"),
        ("GET", "/health/"),
        ("GET", "/ns/team-a/get_parallelism_config/?rank=2&role=draft"),
    ],
)
async def test_a_trailing_slash_is_a_307_to_the_route_without_it(client, method, path):
    """Every route, in every namespace: Location is the path less its slash, the query kept."""
    reply = await client.request(method, path, allow_redirects=False)
    assert reply.status == 307
    bare, _, query = path.partition("?")
    assert reply.headers["Location"] == bare.rstrip("/") + (f"?{query}" if query else "")


async def test_a_client_that_follows_the_307_gets_the_route_answer(client):
    """As requests does against the engines' servers: the method and body re-sent, the route's answer."""
    reply = await client.put("/register_transfer_engine_info/", json=registration(0))
    assert (reply.status, await reply.text()) == (200, "OK")
    assert len(reply.history) == 1
    reply = await client.post("/register_encoder_url/", json={"url": "http://e:1"})
    assert (reply.status, await reply.text()) == (200, "OK")
    body = await (await client.get("/get_transfer_engine_info/?rank=0")).json()
    assert body["remote_instance_transfer_engine_info"][0] == "10.0.0.7:18000"
    assert (await (await client.get("/list_encoder_urls/")).json())["encoder_urls"] == ["http://e:1"]


async def test_an_unknown_route_with_a_slash_is_still_a_404(client):
    """Only a route that exists without the slash redirects; anything else is the JSON 404."""
    reply = await client.get("/no_such_route/", allow_redirects=False)
    assert reply.status == 404
    assert "detail" in await reply.json()


def test_requests_follows_the_307_as_against_the_engines_servers() -> None:
    """The engines' callers use requests: a slashed POST and GET reach the route, method and body re-sent."""
    with ThreadedBootstrapServer(port=0) as server:
        reply = requests.post(
            f"{server.url}/register_encoder_url/", json={"url": "http://e:1/"}, timeout=GUARD
        )
        assert (reply.status_code, reply.text, reply.history[0].status_code) == (200, "OK", 307)
        reply = requests.get(f"{server.url}/list_encoder_urls/", timeout=GUARD)
        assert reply.json()["encoder_urls"] == ["http://e:1"]


async def test_a_redirect_that_leaves_the_body_unread_closes_the_connection(aiohttp_client) -> None:
    """The server drops an unread body by closing: the 307 says so, so no client reuses a closing connection."""
    client = await aiohttp_client(create_app())
    body = b'{"url": "http://e:1"}'
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        # The head alone: the body is still on its way when the redirect is made.
        writer.write(
            b"POST /register_encoder_url/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 307")
    assert b"Connection: close" in head
    assert b"Location: /register_encoder_url\r\n" in head
