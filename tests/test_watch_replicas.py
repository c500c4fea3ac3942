"""GET /watch on two replicas over one Redis: the same changes, in the same (version) order, on both."""

from __future__ import annotations

import asyncio
from typing import Any

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.appkeys import HISTORY
from testbed.redis_server import RedisServer

from .helpers.registry import registration
from .helpers.waits import GUARD, until

REGISTER = "/register_transfer_engine_info"


async def _replicas(aiohttp_client: Any, redis_server: RedisServer) -> tuple[Any, Any]:
    config = ServerConfig(store=redis_server.url)
    return await aiohttp_client(create_app(config)), await aiohttp_client(create_app(config))


async def _follow(client: Any, until_version: int) -> list[dict[str, Any]]:
    """Every change from after=0 up to ``until_version``, following each reply's version."""
    changes: list[dict[str, Any]] = []
    after = 0
    async with asyncio.timeout(GUARD):
        while after < until_version:
            reply = await (await client.get(f"/watch?after={after}&wait=5")).json()
            changes += reply["changes"]
            after = reply["version"]
    return changes


async def test_both_replicas_serve_the_same_changes_in_version_order(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """Registrations and deletes through both replicas at once: each replica serves all, oldest first."""
    a, b = await _replicas(aiohttp_client, redis_server)
    writes = []
    for rank in range(30):
        replica = (a, b)[rank % 2]
        writes.append(replica.put(REGISTER, json=registration(rank % 7)))
    await asyncio.gather(*writes)
    await asyncio.gather(*(b.delete(f"{REGISTER}?rank={rank}") for rank in (1, 2)))
    total = 32
    seen_a, seen_b = await _follow(a, total), await _follow(b, total)
    assert [c["version"] for c in seen_a] == list(range(1, total + 1))
    assert seen_a == seen_b
    listing = await (await a.get("/ranks")).json()
    state: set[int] = set()
    for change in seen_a:
        (state.add if change["op"] == "put" else state.discard)(change["rank"])
    assert state == {item["rank"] for item in listing["ranks"]}


async def test_an_encoder_change_through_the_other_replica_arrives_as_the_change(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """URLs added and removed through A reach B's watchers (long-poll and stream) as the same changes, not a 410.

    Failed before: the feed's entry carried only the key, and B answered its watcher 410.
    """
    a, b = await _replicas(aiohttp_client, redis_server)
    history_b = b.app[HISTORY]
    parked = asyncio.create_task(b.get("/watch?after=0&wait=30&kind=encoder_urls"))
    stream = await b.get("/watch?after=0", headers={"Accept": "text/event-stream"})
    await until(lambda: history_b.watchers == 2)
    assert (await a.post("/register_encoder_url", json={"url": "http://e"})).status == 200
    added = {"op": "put", "kind": "encoder_urls", "url": "http://e", "version": 1}
    assert (await (await a.get("/watch?after=0&wait=5")).json())["changes"] == [added]
    reply = await asyncio.wait_for(parked, GUARD)
    assert reply.status == 200
    assert (await reply.json()) == {"changes": [added], "version": 1}
    assert (await a.post("/register_encoder_url", json={"url": "http://f"})).status == 200
    assert (await a.delete("/unregister_encoder_url", json={"url": "http://e"})).status == 200
    seen_a, seen_b = await _follow(a, 3), await _follow(b, 3)
    assert seen_b == seen_a
    assert [(change["op"], change["url"]) for change in seen_b] == [
        ("put", "http://e"),
        ("put", "http://f"),
        ("delete", "http://e"),
    ]
    events = b""
    async with asyncio.timeout(GUARD):
        while b"id: 3\n" not in events:
            events += await stream.content.readany()
    assert b'"op":"delete","kind":"encoder_urls","url":"http://e","version":3' in events
    stream.close()
    # A change B makes itself is diffed against what it was told: the list it knows is A's.
    assert (await b.delete("/unregister_encoder_url", json={"url": "http://f"})).status == 200
    assert (await (await b.get("/watch?after=3&wait=5")).json())["changes"] == [
        {"op": "delete", "kind": "encoder_urls", "url": "http://f", "version": 4}
    ]


async def test_an_old_feed_entry_without_its_url_is_still_a_410(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """An encoder-list entry with no member named (written before the feed named them) keeps the 410 fallback."""
    from aiobootstrap.store import Change, Key

    _a, b = await _replicas(aiohttp_client, redis_server)
    history_b = b.app[HISTORY]
    parked = asyncio.create_task(b.get("/watch?after=0&wait=30"))
    await until(lambda: history_b.watchers == 1)
    # What the feed handed on for such an entry: the key and version, neither record nor member.
    history_b.changed([Change(Key("default", "encoder_urls", "target", 0), 1)])
    reply = await asyncio.wait_for(parked, GUARD)
    assert reply.status == 410
    assert (await reply.json())["version"] == 1


def test_the_in_order_listener_hears_the_stream_order_past_a_local_write() -> None:
    """While a local write to a key is under way the registry's listener is held back for that key, but the
    in-order listener (the history's, ``Store.follow_in_order``) hears every entry at once, in the stream's
    order, each with the member it names."""
    from aiobootstrap.store import Change, Key
    from aiobootstrap.store.redis.feed import Feed
    from aiobootstrap.store.redis.keys import Keys

    heard: dict[str, list[Change]] = {"registry": [], "history": []}

    class Listener:
        def __init__(self, name: str) -> None:
            self.name = name

        def changed(self, changes):
            heard[self.name].extend(changes)

        def resync(self):
            heard[self.name].clear()

    feed = Feed(None, Keys.of("p"), poll_interval=1.0)  # type: ignore[arg-type]
    feed._listener, feed.tap = Listener("registry"), Listener("history")
    mine = Key("n", "urls", "target", 0)

    def entry(seq: int, kind: str, rank: int, member: bytes) -> tuple[bytes, dict[bytes, bytes]]:
        fields = {b"s": b"%d" % seq, b"n": b"n", b"k": kind.encode(), b"r": b"target", b"i": b"%d" % rank}
        return b"%d-0" % seq, {**fields, b"v": b"%d" % seq, b"o": b"put", b"m": member}

    with feed.writing(mine):
        feed._deliver([entry(1, "urls", 0, b"+http://e"), entry(2, "info", 3, b"-")])
        assert [(c.version, c.member) for c in heard["history"]] == [(1, "+http://e"), (2, None)]
        assert [c.version for c in heard["registry"]] == [2]  # version 1 may be the write's own: held


async def test_a_leased_encoder_url_revoked_through_the_other_replica_arrives_as_its_delete(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """The lease script's removal of a member names it on the feed too: B's watcher is told which URL left."""
    a, b = await _replicas(aiohttp_client, redis_server)
    lease = (await (await a.post("/leases", json={"ttl": 30})).json())["lease"]
    assert (await a.post("/register_encoder_url", json={"url": "http://e", "lease": lease})).status == 200
    assert (await (await b.get("/watch?after=0&wait=5")).json())["version"] == 1
    parked = asyncio.create_task(b.get("/watch?after=1&wait=30"))
    await until(lambda: b.app[HISTORY].watchers == 1)
    assert (await a.delete(f"/leases/{lease}")).status == 200
    reply = await asyncio.wait_for(parked, GUARD)
    assert reply.status == 200
    assert (await reply.json())["changes"] == [
        {"op": "delete", "kind": "encoder_urls", "url": "http://e", "version": 2}
    ]
