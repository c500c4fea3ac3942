"""The encoder URL list: registration, removal, order, versions, and a read that waits for a change."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from aiobootstrap.server.faces.encoders.keys import encoder_list_key
from aiobootstrap.store.file import FileStore

from .helpers.registry import open_registry
from .helpers.waits import GUARD, until

REGISTER = "/register_encoder_url"
UNREGISTER = "/unregister_encoder_url"
LIST = "/list_encoder_urls"


async def listed(client, query: str = "") -> Any:
    reply = await client.get(f"{LIST}{query}")
    assert reply.status == 200
    assert reply.content_type == "application/json"
    return await reply.json()


async def test_register_and_unregister_answer_text_ok(client):
    """POST register and DELETE unregister answer 200 text OK, as SPEC section 7 words them."""
    reply = await client.post(REGISTER, json={"url": "http://10.0.0.9:8000"})
    assert (reply.status, reply.content_type, await reply.text()) == (200, "text/plain", "OK")
    reply = await client.delete(UNREGISTER, json={"url": "http://10.0.0.9:8000"})
    assert (reply.status, reply.content_type, await reply.text()) == (200, "text/plain", "OK")


async def test_an_empty_list_has_version_zero(client):
    """Before any registration the list is empty, version 0."""
    assert await listed(client) == {"encoder_urls": [], "version": 0}


async def test_registration_is_idempotent_and_ordered(client):
    """A URL registered twice is listed once; the list keeps the order of first registration."""
    for url in ("http://b", "http://a", "http://b", "http://c", "http://a"):
        assert (await client.post(REGISTER, json={"url": url})).status == 200
    body = await listed(client)
    assert body == {"encoder_urls": ["http://b", "http://a", "http://c"], "version": 3}


async def test_unregister_removes_and_is_ok_when_absent(client):
    """DELETE removes a URL (the others keep their order); an absent URL is OK and changes nothing."""
    for url in ("http://a", "http://b", "http://c"):
        await client.post(REGISTER, json={"url": url})
    await client.delete(UNREGISTER, json={"url": "http://b"})
    assert await listed(client) == {"encoder_urls": ["http://a", "http://c"], "version": 4}
    reply = await client.delete(UNREGISTER, json={"url": "http://never"})
    assert (reply.status, await reply.text()) == (200, "OK")
    assert (await listed(client))["version"] == 4
    await client.post(REGISTER, json={"url": "http://b"})
    assert (await listed(client))["encoder_urls"] == ["http://a", "http://c", "http://b"]


async def test_unregistering_the_last_url_is_a_change(client):
    """The list emptied is a new version, not a vanished list: a waiter sees it."""
    await client.post(REGISTER, json={"url": "http://a"})
    await client.delete(UNREGISTER, json={"url": "http://a"})
    assert await listed(client) == {"encoder_urls": [], "version": 2}


async def test_a_waiting_read_is_woken_by_a_change(client, registry):
    """after=V&wait=S holds until the list changes after V, then answers the new list at once."""
    await client.post(REGISTER, json={"url": "http://a"})
    version = (await listed(client))["version"]
    task = asyncio.create_task(client.get(f"{LIST}?after={version}&wait={GUARD}"))
    await until(lambda: registry.parked == 1)
    # Registering a listed URL again is no change: the waiter stays parked.
    await client.post(REGISTER, json={"url": "http://a"})
    await client.delete(UNREGISTER, json={"url": "http://absent"})
    assert not task.done()
    await client.post(REGISTER, json={"url": "http://b"})
    reply = await asyncio.wait_for(task, GUARD)
    assert await reply.json() == {"encoder_urls": ["http://a", "http://b"], "version": version + 1}
    assert reply.headers["X-Aiobootstrap-Version"] == str(version + 1)


async def test_a_waiting_read_is_woken_by_a_removal(client, registry):
    """A removal is a change too."""
    await client.post(REGISTER, json={"url": "http://a"})
    task = asyncio.create_task(client.get(f"{LIST}?after=1&wait={GUARD}"))
    await until(lambda: registry.parked == 1)
    await client.delete(UNREGISTER, json={"url": "http://a"})
    assert await (await asyncio.wait_for(task, GUARD)).json() == {"encoder_urls": [], "version": 2}


async def test_a_wait_that_runs_out_answers_the_unchanged_list(client):
    """No change before the wait ends: 200 with the list as it is and its (old) version."""
    await client.post(REGISTER, json={"url": "http://a"})
    assert await listed(client, "?after=1&wait=0.01") == {"encoder_urls": ["http://a"], "version": 1}
    assert await listed(client, "?after=5&wait=0.01") == {"encoder_urls": ["http://a"], "version": 1}


async def test_a_first_registration_wakes_a_read_of_the_empty_list(client, registry):
    """A wait on a list that never existed ends with its first URL."""
    task = asyncio.create_task(client.get(f"{LIST}?wait={GUARD}"))
    await until(lambda: registry.parked == 1)
    await client.post(REGISTER, json={"url": "http://first"})
    assert (await (await asyncio.wait_for(task, GUARD)).json())["encoder_urls"] == ["http://first"]


MISSING = {"detail": "Missing or empty 'url' field in request body", "error": "Missing or empty 'url' field"}
"""The engines' servers' words: the standalone one's detail, the merged one's error, both for their callers."""


@pytest.mark.parametrize(
    ("body", "reply_body"),
    [
        ({}, MISSING),
        ({"url": None}, MISSING),
        ({"url": ""}, MISSING),
        ({"url": "/"}, MISSING),
        ({"url": 7}, {"detail": "The field url must be a string."}),
        ({"url": ["http://a"]}, {"detail": "The field url must be a string."}),
        (["http://a"], {"detail": "The request body must be a JSON object."}),
    ],
)
@pytest.mark.parametrize("route", ["register", "unregister"])
async def test_bad_bodies_are_400_naming_url_and_store_nothing(client, registry, body, reply_body, route):
    """A missing, empty or non-string url is a 400 naming the field; nothing changes."""
    send = client.post(REGISTER, json=body) if route == "register" else client.delete(UNREGISTER, json=body)
    reply = await send
    assert reply.status == 400
    assert await reply.json() == reply_body
    assert await registry.store.version("default") == 0


async def test_urls_are_kept_as_sent_less_a_trailing_slash(client):
    """As the engines' server keeps url.rstrip("/"): with or without the slash, one encoder."""
    await client.post(REGISTER, json={"url": "http://10.0.0.9:8000/"})
    await client.post(REGISTER, json={"url": "http://10.0.0.9:8000"})
    await client.post(REGISTER, json={"url": "HTTP://Other:1//"})
    assert (await listed(client))["encoder_urls"] == ["http://10.0.0.9:8000", "HTTP://Other:1"]
    await client.delete(UNREGISTER, json={"url": "http://10.0.0.9:8000///"})
    assert (await listed(client))["encoder_urls"] == ["HTTP://Other:1"]


@pytest.mark.parametrize("query", ["?wait=-1", "?after=x", "?after=1&after=2"])
async def test_bad_list_parameters_are_400(client, query):
    """wait and after follow the grammar of every get."""
    assert (await client.get(f"{LIST}{query}")).status == 400


async def test_methods_are_those_of_the_spec(client):
    """Registration is POST, removal DELETE: another method is a JSON 405."""
    reply = await client.put(REGISTER, json={"url": "http://a"})
    assert reply.status == 405
    assert "detail" in await reply.json()


# -- the store operation (the contract itself: tests/test_stores.py) --


async def test_file_store_keeps_concurrent_member_changes_and_reloads_them(tmp_path: Path):
    """Member changes in flight together build on each other (none lost), and a reload sees them all."""
    path = tmp_path / "state"
    store = FileStore(str(path))
    await open_registry(store)
    key = encoder_list_key("default")
    urls = [f"http://e{i}" for i in range(20)]
    await asyncio.gather(*[store.set_member(key, url, present=True) for url in urls])
    await asyncio.gather(
        store.set_member(key, "http://e3", present=False),
        store.set_member(key, "http://e3", present=True),
        store.set_member(key, "http://e0", present=True),
    )
    record = await store.get(key)
    assert record is not None
    assert record.value["members"] == [url for url in urls if url != "http://e3"] + ["http://e3"]
    await store.close()

    again = FileStore(str(path))
    await open_registry(again)
    reloaded = await again.get(key)
    assert reloaded is not None
    assert (reloaded.value, reloaded.version) == (record.value, record.version)
    await again.close()


async def test_a_full_list_refuses_one_more_url(client, registry, monkeypatch):
    """Past the member limit a new URL is a 409 and nothing changes; a listed URL still registers."""
    monkeypatch.setattr("aiobootstrap.store.members.MAX_MEMBERS", 2)
    for url in ("http://a", "http://b"):
        await client.post(REGISTER, json={"url": url})
    reply = await client.post(REGISTER, json={"url": "http://c"})
    assert reply.status == 409
    assert "limit" in (await reply.json())["detail"]
    assert (await client.post(REGISTER, json={"url": "http://a"})).status == 200
    assert await listed(client) == {"encoder_urls": ["http://a", "http://b"], "version": 2}


async def test_an_encoder_url_past_the_length_limit_is_a_400_and_lists_nothing(client):
    """A URL of 8,193 characters is refused with a detail naming the limit, and nothing is listed
    (one of a MiB, registered and unregistered 1,500 times, grew Redis' feed by 938 MiB); one of
    8,192 is kept."""
    from aiobootstrap.wire.bodies import MAX_URL_LENGTH

    too_long = "http://e:8000/" + "x" * (MAX_URL_LENGTH - 13)
    reply = await client.post("/register_encoder_url", json={"url": too_long})
    assert reply.status == 400
    assert str(MAX_URL_LENGTH) in (await reply.json())["detail"]
    assert (await listed(client))["encoder_urls"] == []
    longest = too_long[:MAX_URL_LENGTH]
    assert (await client.post("/register_encoder_url", json={"url": longest})).status == 200
    assert (await listed(client))["encoder_urls"] == [longest]
