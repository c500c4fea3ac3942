"""GET /watch: every change of a namespace after a version, oldest first, as a long-poll or an SSE stream."""

from __future__ import annotations

import asyncio
import random

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.appkeys import HISTORY

from .helpers.registry import registration
from .helpers.waits import GUARD, until

REGISTER = "/register_transfer_engine_info"
CONFIG = "/register_parallelism_config"


async def _caught_up(client, namespace: str = "default") -> None:
    """Until the history has heard every change the store acknowledged (over Redis the stream
    brings a change a moment after its write's reply)."""
    history = client.app[HISTORY]
    version = await history.store.version(namespace)
    await until(lambda: (history.latest(namespace) or 0) >= version)


async def _watch(client, query: str = "after=0", path: str = "/watch"):
    namespace = path.split("/")[2] if path.startswith("/ns/") else "default"
    await _caught_up(client, namespace)
    response = await client.get(f"{path}?{query}")
    assert response.status == 200, await response.text()
    return await response.json()


async def test_puts_and_deletes_are_changes_with_versions_oldest_first(client):
    """Every registration and unregister is a change of its own version, in order."""
    await client.put(REGISTER, json=registration(0))
    await client.put(REGISTER, json=registration(1))
    await client.delete(f"{REGISTER}?rank=0")
    reply = await _watch(client)
    assert reply == {
        "changes": [
            {"op": "put", "kind": "transfer_engine_info", "role": "target", "rank": 0, "version": 1},
            {"op": "put", "kind": "transfer_engine_info", "role": "target", "rank": 1, "version": 2},
            {"op": "delete", "kind": "transfer_engine_info", "role": "target", "rank": 0, "version": 3},
        ],
        "version": 3,
    }
    assert await _watch(client, "after=2") == {"changes": [reply["changes"][2]], "version": 3}


async def test_encoder_url_changes_name_the_url(client):
    """An encoder list change says which URL joined (put) or left (delete)."""
    await client.post("/register_encoder_url", json={"url": "http://e1"})
    await client.post("/register_encoder_url", json={"url": "http://e2"})
    await client.post("/register_encoder_url", json={"url": "http://e1"})  # no change, no version
    await client.delete("/unregister_encoder_url", json={"url": "http://e1"})
    reply = await _watch(client)
    assert reply["changes"] == [
        {"op": "put", "kind": "encoder_urls", "url": "http://e1", "version": 1},
        {"op": "put", "kind": "encoder_urls", "url": "http://e2", "version": 2},
        {"op": "delete", "kind": "encoder_urls", "url": "http://e1", "version": 3},
    ]


async def test_a_parked_watch_is_answered_by_the_next_change(client):
    """With nothing after V, the watch waits, and the next change answers it at once."""
    await client.put(REGISTER, json=registration(0))
    history = client.app[HISTORY]
    task = asyncio.create_task(_watch(client, "after=1&wait=30"))
    await until(lambda: history.watchers == 1)
    await client.put(REGISTER, json=registration(5))
    reply = await asyncio.wait_for(task, GUARD)
    assert [change["rank"] for change in reply["changes"]] == [5]
    assert reply["version"] == 2
    assert history.watchers == 0


async def test_a_watch_that_times_out_answers_no_changes(client):
    """Nothing within wait=S: 200 with no changes and the version to ask after next."""
    await client.put(REGISTER, json=registration(0))
    assert await _watch(client, "after=1&wait=0.05") == {"changes": [], "version": 1}


async def test_an_after_past_the_namespace_is_answered_from_its_version(client):
    """after=50 of a namespace at version 1 (a mistake, or a number from elsewhere): answered with the
    namespace's version, and a parked one woken by its next change, version 2 (it answered 50, and a client
    asking after 50 would have skipped every change up to it)."""
    await client.put(REGISTER, json=registration(0))
    assert await _watch(client, "after=50&wait=0.05") == {"changes": [], "version": 1}
    history = client.app[HISTORY]
    task = asyncio.create_task(_watch(client, "after=50&wait=30"))
    await until(lambda: history.watchers == 1)
    await client.put(REGISTER, json=registration(5))
    reply = await asyncio.wait_for(task, GUARD)
    assert ([change["rank"] for change in reply["changes"]], reply["version"]) == ([5], 2)


async def test_filters_select_kind_role_and_ranks(client):
    """kind, role and ranks narrow the changes; the version still moves past the others."""
    await client.put(REGISTER, json=registration(0))
    await client.put(REGISTER, json={**registration(1), "role": "draft"})
    await client.put(CONFIG, json={"rank": 2, "parallelism_config": {"tp": 2}})
    await client.put(REGISTER, json=registration(3))
    await client.post("/register_encoder_url", json={"url": "http://e"})

    async def versions(query: str) -> list[int]:
        return [change["version"] for change in (await _watch(client, f"after=0&{query}"))["changes"]]

    assert await versions("kind=transfer_engine_info") == [1, 2, 4]
    assert await versions("role=draft") == [2]
    assert await versions("ranks=2-3") == [3, 4]
    assert await versions("kind=transfer_engine_info&ranks=0-2") == [1, 2]
    assert await versions("kind=parallelism_config") == [3]
    assert await versions("kind=encoder_urls") == [5]
    assert await _watch(client, "after=0&role=nobody&wait=0") == {"changes": [], "version": 5}


@pytest.mark.parametrize(
    "query",
    ["after=-1", "after=x", "after=0&wait=-1", "after=0&kind=nope", "after=0&ranks=a", "after=0&role="],
)
async def test_bad_watch_parameters_are_400(client, query):
    response = await client.get(f"/watch?{query}")
    assert response.status == 400
    assert "detail" in await response.json()


async def test_namespaces_are_watched_apart(client):
    """/ns/NAME/watch sees only its namespace's changes."""
    await client.put(f"/ns/a{REGISTER}", json=registration(0))
    await client.put(REGISTER, json=registration(1))
    reply = await _watch(client, path="/ns/a/watch")
    assert [change["rank"] for change in reply["changes"]] == [0]
    assert [change["rank"] for change in (await _watch(client))["changes"]] == [1]


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig(watch_history=1000, watch_ping=0.05)


@pytest.fixture
async def small(aiohttp_client):
    """A server that keeps 3 changes per namespace."""
    return await aiohttp_client(create_app(ServerConfig(watch_history=3)))


async def test_the_history_bound_and_its_410(small):
    """Past --watch-history changes, an older after is 410 with the version; within it, served."""
    client = small
    for rank in range(5):
        await client.put(REGISTER, json=registration(rank))
    response = await client.get("/watch?after=1")
    assert response.status == 410
    body = await response.json()
    assert body["version"] == 5
    assert "listing" in body["detail"]
    reply = await _watch(client, "after=2")
    assert [change["version"] for change in reply["changes"]] == [3, 4, 5]


async def _events(response, count: int) -> list[str]:
    """The next ``count`` non-comment blocks of an event stream."""
    blocks: list[str] = []
    buffer = b""
    async with asyncio.timeout(GUARD):
        while len(blocks) < count:
            buffer += await response.content.readany()
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                if not block.startswith(b":"):
                    blocks.append(block.decode())
    return blocks


async def test_sse_framing_and_resume_from_last_event_id(client):
    """Each change is an event (id: version, data: change); Last-Event-ID resumes after it."""
    await client.put(REGISTER, json=registration(0))
    await client.put(REGISTER, json=registration(1))
    response = await client.get("/watch?after=0", headers={"Accept": "text/event-stream"})
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    first = await _events(response, 2)
    assert first[0] == (
        'id: 1\ndata: {"op":"put","kind":"transfer_engine_info","role":"target","rank":0,"version":1}'
    )
    assert first[1].startswith("id: 2\n")
    await client.put(REGISTER, json=registration(2))
    assert (await _events(response, 1))[0].startswith("id: 3\n")
    response.close()
    resumed = await client.get(
        "/watch?after=0", headers={"Accept": "text/event-stream", "Last-Event-ID": "2"}
    )
    assert (await _events(resumed, 1))[0].startswith("id: 3\n")
    resumed.close()


async def test_a_quiet_stream_sends_comment_lines(client):
    """With no change for watch_ping seconds, the stream sends a comment line."""
    response = await client.get("/watch?after=0", headers={"Accept": "text/event-stream"})
    seen = b""
    async with asyncio.timeout(GUARD):
        while seen.count(b": ping\n\n") < 3:
            seen += await response.content.readany()
    response.close()


async def test_a_stream_resumed_past_the_history_is_410(small):
    """A Last-Event-ID older than the history is the same 410, before any stream starts."""
    client = small
    for rank in range(5):
        await client.put(REGISTER, json=registration(rank))
    response = await client.get("/watch", headers={"Accept": "text/event-stream", "Last-Event-ID": "1"})
    assert response.status == 410
    assert (await response.json())["version"] == 5


async def test_a_stream_ends_cleanly_at_shutdown(aiohttp_client):
    """Stopping the server ends an open event stream (its body ends; no error, no hang)."""
    test_client = await aiohttp_client(create_app(ServerConfig(watch_ping=30)))
    response = await test_client.get("/watch?after=0", headers={"Accept": "text/event-stream"})
    history = test_client.app[HISTORY]
    await until(lambda: history.watchers == 1)
    await test_client.server.close()
    async with asyncio.timeout(GUARD):
        await response.read()
    assert history.watchers == 0


async def test_a_watcher_rebuilds_the_listing_exactly_after_a_storm(client, config):
    """Following every change from after=0 through a storm of puts and deletes gives the listing exactly."""
    seed = random.Random(17)
    ranks: set[int] = set()
    state: set[int] = set()
    after = 0
    for _ in range(4):
        puts = [seed.randrange(20) for _ in range(15)]
        await asyncio.gather(*(client.put(REGISTER, json=registration(rank)) for rank in puts))
        ranks.update(puts)
        doomed = seed.sample(sorted(ranks), 5)
        await asyncio.gather(*(client.delete(f"{REGISTER}?rank={rank}") for rank in doomed))
        ranks.difference_update(doomed)
        # Follow as a watcher does: each reply's version is the next after.
        while True:
            reply = await _watch(client, f"after={after}&wait=0")
            for change in reply["changes"]:
                (state.add if change["op"] == "put" else state.discard)(change["rank"])
            if reply["version"] == after:
                break
            after = reply["version"]
    listing = await (await client.get("/ranks")).json()
    assert state == {item["rank"] for item in listing["ranks"]} == ranks
    assert after == listing["version"]


async def test_probing_namespaces_leaves_nothing_behind(aiohttp_client):
    """A watch in a namespace that never changes leaves no log once it is answered."""
    test_client = await aiohttp_client(create_app(ServerConfig()))
    for name in ("p1", "p2", "p3"):
        assert (await test_client.get(f"/ns/{name}/watch?after=0&wait=0.01")).status == 200
    assert test_client.app[HISTORY]._logs == {}


async def test_metrics_count_watchers_and_streams(client):
    """/metrics shows the parked watchers and the open event streams."""
    history = client.app[HISTORY]
    parked = asyncio.create_task(_watch(client, "after=0&wait=30"))
    stream = await client.get("/watch?after=0", headers={"Accept": "text/event-stream"})
    await until(lambda: history.watchers == 2)
    text = await (await client.get("/metrics")).text()
    assert "aiobootstrap_watchers 2.0" in text
    assert "aiobootstrap_watch_streams 1.0" in text
    await client.put(REGISTER, json=registration(0))
    await asyncio.wait_for(parked, GUARD)
    stream.close()


async def test_boot_of_another_incarnation_is_410_at_once(client):
    """boot=ID names where after came from: another incarnation's is 410 without waiting; this one's is served."""
    await client.put(REGISTER, json=registration(0))
    boot = (await client.get("/health")).headers["X-Aiobootstrap-Boot"]
    response = await client.get("/watch?after=40&wait=30&boot=elsewhere")
    assert response.status == 410
    assert (await response.json())["version"] == 1
    assert (await _watch(client, f"after=0&boot={boot}"))["version"] == 1


async def test_a_stream_that_falls_behind_the_history_ends_with_a_gone_event(aiohttp_client):
    """A stream whose position the history no longer vouches for (the feed missed changes) ends with
    ``event: gone`` carrying the 410's body."""
    from aiobootstrap.store import Change

    from .helpers.registry import info_key

    test_client = await aiohttp_client(create_app(ServerConfig(watch_ping=30)))
    await test_client.put(REGISTER, json=registration(0))
    response = await test_client.get("/watch?after=1", headers={"Accept": "text/event-stream"})
    history = test_client.app[HISTORY]
    await until(lambda: history.watchers == 1)
    history.resync()
    history.changed([Change(info_key(0), 3)])  # version 2 was missed
    body = b""
    async with asyncio.timeout(GUARD):
        while not response.content.at_eof():
            body += await response.content.readany()
    assert b"event: gone\ndata: " in body
    assert b'"version":3' in body
