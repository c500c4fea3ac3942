"""The Redis store's fast paths: reads and puts coalesced per batch, records decoded once per blob.

Behaviour, not speed: the replies a replica gives are the bytes one
in-memory process gives; a record in the format an older replica writes is
served; a record decoded once is never served after it changed (through
another replica, a delete, a lease's expiry); puts sent in one call keep
their own versions and their own refusals.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._names import TRANSFER_ENGINE_INFO, VERSION_HEADER
from aiobootstrap.exceptions import LeaseNotFound, TooManyRanks
from aiobootstrap.store import Key, StoreLimits
from aiobootstrap.store.redis import RedisStore
from testbed.redis_server import RedisServer

from .helpers.redis_store import FAST, Recorder
from .helpers.registry import registration

GET = "/get_transfer_engine_info"
PUT = "/register_transfer_engine_info"
WEIGHTS = {"layers.0.weight": [140_000_000_000, 1 << 20, 2], "ünïcode ✓": [1, 2.5, None]}


def key(rank: int, role: str = "target") -> Key:
    return Key("default", TRANSFER_ENGINE_INFO, role, rank)


def value(session: str) -> dict[str, Any]:
    return {"session_id": session, "weights_info_dict": {"w": [1, 2, 3]}}


async def _opened(url: str, heard: Recorder | None = None, **kwargs: Any) -> RedisStore:
    store = RedisStore(url, **{**FAST, **kwargs})
    await store.open(Recorder() if heard is None else heard)
    return store


async def test_gets_through_a_replica_are_the_bytes_of_one_in_memory_process(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """Same registrations through a replica and a memory server: each get's body and version header are equal."""
    kwargs = {"server_kwargs": {"handler_cancellation": True}}
    replica = await aiohttp_client(create_app(ServerConfig(store=redis_server.url)), **kwargs)
    memory = await aiohttp_client(create_app(ServerConfig()), **kwargs)
    backend = {"rank": 2, "transfer_engine_info": {"backend": "nixl", "agent": "a2", "blob": "x" * 300}}
    for client in (replica, memory):
        assert (await client.put(PUT, json=registration(0, "10.0.0.1:1", WEIGHTS))).status == 200
        assert (await client.put(PUT, json=registration(1, "10.0.0.2:2"))).status == 200
        assert (await client.put(PUT, json=backend)).status == 200
        assert (await client.put(PUT, json=registration(0, "10.0.0.1:again", WEIGHTS))).status == 200
    for params in ({"rank": "0"}, {"rank": "1"}, {"rank": "2"}, {"rank": "0", "form": "object"}):
        # Twice: the second read is served from the record decoded by the first.
        for _ in range(2):
            ours, theirs = await replica.get(GET, params=params), await memory.get(GET, params=params)
            assert ours.status == 200
            assert (ours.status, await ours.read()) == (theirs.status, await theirs.read())
            assert ours.headers[VERSION_HEADER] == theirs.headers[VERSION_HEADER]
            assert ours.headers["Content-Type"] == theirs.headers["Content-Type"]
    batch = {"ranks": "0-2"}
    ours, theirs = (
        await replica.get(f"{GET}_batch", params=batch),
        await memory.get(f"{GET}_batch", params=batch),
    )
    assert (ours.status, await ours.read()) == (theirs.status, await theirs.read())


async def test_a_record_in_the_format_an_older_replica_writes_is_served(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """A rank field written as "VERSION REGISTERED_AT JSON", by no script of this tree: a get serves it."""
    import redis.asyncio as aioredis

    client = await aiohttp_client(create_app(ServerConfig(store=redis_server.url)))
    raw = aioredis.Redis.from_url(redis_server.url)
    try:
        table = "{aiobootstrap}:records:default:transfer_engine_info:target"
        await raw.hset(table, "4", b'7 1764600000.25 {"session_id":"old:1","weights_info_dict":{"w":[4]}}')
    finally:
        await raw.aclose()
    reply = await client.get(GET, params={"rank": "4"})
    assert reply.status == 200
    assert reply.headers[VERSION_HEADER] == "7"
    assert await reply.json() == {
        "rank": 4,
        "remote_instance_transfer_engine_info": ["old:1", {"w": [4]}],
        "version": 7,
    }


async def test_a_decoded_record_is_never_served_after_it_changed_elsewhere(redis_server: RedisServer) -> None:
    """A reads a rank (and keeps it decoded); B replaces it, deletes it, a lease ends it: A reads each change."""
    heard = Recorder()
    a, b = await _opened(redis_server.url, heard), await _opened(redis_server.url)
    try:
        first = await b.put(key(5), value("first"))
        assert await a.get(key(5)) == first
        assert await a.get(key(5)) is await a.get(key(5)), "the same blob: the same record, decoded once"
        second = await b.put(key(5), value("second"))
        assert await a.get(key(5)) == second
        assert await b.delete(key(5)) == second
        assert await a.get(key(5)) is None
        assert await a.get_many([key(5), key(6)]) == [None, None]

        lease = await b.grant_lease("default", 0.2)
        held = await b.put(key(5), value("leased"), lease.id)
        assert await a.get(key(5)) == held
        await heard.until(lambda: any(c.deleted and c.version > held.version for c in heard.about(key(5))))
        assert await a.get(key(5)) is None
        third = await b.put(key(5), value("third"))
        assert await a.get(key(5)) == third
    finally:
        await a.close()
        await b.close()


async def test_reads_of_one_batch_share_commands_and_each_gets_its_own_answer(
    redis_server: RedisServer,
) -> None:
    """Gets of several tables, the same rank twice, and absent ranks, asked together: each answered rightly."""
    store = await _opened(redis_server.url)
    try:
        stored = {
            k: await store.put(k, value(f"{k.role}-{k.rank}")) for k in (key(0), key(1), key(0, "draft"))
        }
        asked = [key(0), key(1), key(0), key(9), key(0, "draft"), key(1, "draft")]
        answers = await asyncio.gather(*(store.get(k) for k in asked), store.get_many(asked))
        expected = [stored.get(k) for k in asked]
        assert list(answers[:-1]) == expected
        assert answers[-1] == expected
    finally:
        await store.close()


async def test_puts_of_one_batch_keep_their_own_versions_and_refusals(redis_server: RedisServer) -> None:
    """Ten puts in one loop turn under a 4-rank cap, one naming no lease: four stored, each its own version."""
    store = await _opened(redis_server.url, limits=StoreLimits(max_ranks=4))
    try:
        bogus = store.put(key(100), value("no lease"), "no-such-lease")
        results = await asyncio.gather(
            bogus, *(store.put(key(rank), value(f"s{rank}")) for rank in range(10)), return_exceptions=True
        )
        assert isinstance(results[0], LeaseNotFound)
        stored = [result for result in results[1:] if not isinstance(result, BaseException)]
        refused = [result for result in results[1:] if isinstance(result, BaseException)]
        assert [record.rank for record in stored] == [0, 1, 2, 3]
        assert len(refused) == 6
        assert all(isinstance(error, TooManyRanks) for error in refused)
        assert [record.version for record in stored] == [1, 2, 3, 4]
        for record in stored:
            assert await store.get(record.key) == record
        # A replaced rank is under the cap: the same batch may replace and refuse.
        again = await asyncio.gather(
            store.put(key(0), value("again")), store.put(key(7), value("s7")), return_exceptions=True
        )
        assert getattr(again[0], "version", None) == 5
        assert isinstance(again[1], TooManyRanks)
    finally:
        await store.close()


def test_commands_packed_in_c_are_the_bytes_redis_py_packs() -> None:
    """hiredis packs what redis-py would, byte for byte; what hiredis refuses meets redis-py's own error."""
    from redis.asyncio.connection import AbstractConnection, UnixDomainSocketConnection
    from redis.exceptions import DataError

    from aiobootstrap.store.redis.packing import pack_in_c

    class Pool:
        connection_class: type[AbstractConnection] = UnixDomainSocketConnection

    pool = Pool()
    pack_in_c(pool)
    pack_in_c(pool)  # once is enough: not wrapped twice
    assert pool.connection_class.__mro__[2] is UnixDomainSocketConnection
    packed, plain = pool.connection_class(), UnixDomainSocketConnection()
    commands: list[tuple[Any, ...]] = [
        ("EVALSHA", "f" * 40, 2, "{p}:a", "{p}:b", -1, 10_000, "ünï", b"\x00\xff", 1764600000.125),
        ("CONFIG GET", "appendfsync"),
        (b"CLIENT SETNAME", "x"),
        ("HMGET", "{p}:records:default:k:target", "0", "0", "17"),
    ]
    for command in commands:
        assert b"".join(packed.pack_command(*command)) == b"".join(plain.pack_command(*command))
    for connection in (packed, plain):
        with pytest.raises(DataError):
            connection.pack_command("SET", "k", True)


async def test_writes_of_many_batches_at_once_keep_the_newest_and_tell_every_version_in_order(
    aiohttp_client: Any, redis_server: RedisServer
) -> None:
    """400 puts of one rank at once (several write batches out together, their replies in any order):
    the rank reads as the newest version, a waiter parked before them is answered, and the watch tells
    every version once, in order."""
    client = await aiohttp_client(create_app(ServerConfig(store=redis_server.url)))
    waiter = asyncio.ensure_future(client.get(GET, params={"rank": "0", "wait": "30"}))
    await asyncio.sleep(0)  # parked (or about to be) before the first put

    async def put(n: int) -> None:
        assert (await client.put(PUT, json=registration(0, f"10.0.0.1:{n}"))).status == 200

    await asyncio.gather(*(put(n) for n in range(400)))
    watched = await (await client.get("/watch", params={"after": "0"})).json()
    assert [change["version"] for change in watched["changes"]] == list(range(1, 401))
    newest = await client.get(GET, params={"rank": "0"})
    assert int(newest.headers[VERSION_HEADER]) == 400, "the newest version, whatever reply came back last"
    answered = await asyncio.wait_for(waiter, 30)
    assert answered.status == 200
