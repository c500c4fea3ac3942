"""``GET /`` and ``/ns/{namespace}/``: the page's reply itself, without a browser (tests/test_page.py has one)."""

from __future__ import annotations

import re

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.tokens import TokenSet

_BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


async def test_the_page_is_one_html_file_under_a_strict_policy(aiohttp_client):
    """The page is HTML from the package; its policy lets it reach only its own server, and run only its own script."""
    client = await aiohttp_client(create_app())
    reply = await client.get("/", headers=_BROWSER)
    assert reply.status == 200
    assert reply.content_type == "text/html"
    text = await reply.text()
    assert "<script>" in text
    assert "<style>" in text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), "no request to any other host"
    policy = reply.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy
    assert "connect-src 'self'" in policy
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]+';", policy), policy
    assert "unsafe" not in policy


async def test_a_namespace_has_its_page_and_a_bad_name_is_a_400(aiohttp_client):
    client = await aiohttp_client(create_app())
    assert (await client.get("/ns/team-a/", headers=_BROWSER)).status == 200
    reply = await client.get("/ns/-bad-/", headers=_BROWSER)
    assert reply.status == 400
    assert "namespace" in (await reply.json())["detail"]


async def test_without_a_token_a_browser_gets_the_page_with_its_401_and_others_the_json(aiohttp_client):
    """With --auth-reads token the page is a read: a 401. A browser gets the page (it asks for the token), with
    no record in it; a client that does not ask for HTML gets the JSON refusal every route gives."""
    client = await aiohttp_client(create_app(ServerConfig(auth_tokens=TokenSet.parse("secret-token\n"))))
    browser = await client.get("/", headers=_BROWSER)
    assert browser.status == 401
    assert browser.content_type == "text/html"
    assert browser.headers["WWW-Authenticate"].startswith("Bearer")
    assert "token-form" in await browser.text()
    other = await client.get("/")
    assert other.status == 401
    assert list(await other.json()) == ["detail"]
    with_token = await client.get("/", headers={**_BROWSER, "Authorization": "Bearer secret-token"})
    assert with_token.status == 200


async def test_with_open_reads_anyone_loads_the_page(aiohttp_client):
    tokens = TokenSet.parse("secret-token\n")
    client = await aiohttp_client(create_app(ServerConfig(auth_tokens=tokens, auth_reads="open")))
    assert (await client.get("/", headers=_BROWSER)).status == 200
