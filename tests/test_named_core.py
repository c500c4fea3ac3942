"""Named records beyond one store call: the file store's restart, Redis replicas, the registry's wait,
the watch history and ``/watch``'s wire.

A named record (``Key.named``) is what Mooncake's metadata (string keys) will be stored as; no face
writes one yet, so these tests write through the store or the registry.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from aiobootstrap import Registry
from aiobootstrap._names import DEFAULT_ROLE, ENCODER_URLS, TRANSFER_ENGINE_INFO
from aiobootstrap.core.history import History, LoggedChange, listeners
from aiobootstrap.exceptions import UnexpectedReply
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.server.change_words import ChangeWords
from aiobootstrap.store import NO_RANK, Key, MemoryStore
from aiobootstrap.wire.watch import WatchedChange, decode_change, decode_watch, encode_watch, sse_event
from testbed.redis_server import RedisServer

from .helpers.file_store import line, open_file
from .helpers.redis_store import FAST, Recorder
from .helpers.registry import open_registry
from .helpers.waits import GUARD, until

KIND = "metadata"
SEGMENT = "mooncake/ram/10.0.0.1:1234"
ODD = "line\nbreak \u00e9 \U0001f680"


def named(name: str, namespace: str = "default") -> Key:
    return Key.named(namespace, KIND, DEFAULT_ROLE, name)


def ranked(rank: int) -> Key:
    return Key("default", KIND, DEFAULT_ROLE, rank)


# -- the file store's journal ------------------------------------------------------


async def test_named_records_and_their_leases_survive_restarts(tmp_path: Path) -> None:
    """Named records (one on a lease), a delete, a rank of the same digits: all as they were after a
    restart, and again after the compaction that restart made; versions go on above them."""
    path = tmp_path / "state"
    store = await open_file(path)
    lease = await store.grant_lease("default", 60)
    segment = await store.put(named(SEGMENT), {"v": 1}, lease=lease.id)
    odd = await store.put(named(ODD), {"v": 2})
    seven = await store.put(named("7"), {"v": 3})
    rank7 = await store.put(ranked(7), {"v": 4})
    await store.put(named("gone"), {"v": 5})
    await store.delete(named("gone"))
    await store.close()
    assert b'"name":"mooncake/ram/10.0.0.1:1234"' in path.read_bytes()
    for _ in range(2):  # the first reopen reads the appended lines, the second the compacted ones
        store = await open_file(path)
        assert await store.get_many([named(SEGMENT), named(ODD), named("7"), ranked(7), named("gone")]) == [
            segment,
            odd,
            seven,
            rank7,
            None,
        ]
        held = await store.leases_of([(named(SEGMENT), None), (named(ODD), None)])
        assert held[0] is not None
        assert held[0][0] == lease.id
        assert held[1] is None
        assert await store.version("default") == 6
        await store.close()
    store = await open_file(path)
    await store.revoke_lease("default", lease.id)
    assert await store.get(named(SEGMENT)) is None
    await store.close()
    store = await open_file(path)
    assert await store.get(named(SEGMENT)) is None
    assert await store.count("default", KIND, DEFAULT_ROLE) == 3
    await store.close()


async def test_a_journal_of_ranks_only_loads_and_a_line_with_a_rank_and_a_name_is_skipped(
    tmp_path: Path,
) -> None:
    """An old journal (no names) loads as before; a line naming both a rank and a name is unreadable."""
    path = tmp_path / "state"
    path.write_bytes(
        b"aiobootstrap-journal 1\n"
        + line({"op": "put", "rank": 3, "version": 1, "at": 1.5, "value": {"session_id": "s"}})
        + line({"op": "put", "kind": KIND, "name": "n", "rank": 0, "version": 2, "at": 1.5, "value": {}})
        + line({"op": "put", "kind": KIND, "name": "ok", "version": 3, "at": 1.5, "value": {"v": 1}})
        + line({"op": "put", "kind": KIND, "name": "", "version": 4, "at": 1.5, "value": {}})
    )
    store = await open_file(path)
    assert store.skipped == 2
    old = await store.get(Key("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE, 3))
    assert old is not None
    assert old.value == {"session_id": "s"}
    ok = await store.get(named("ok"))
    assert ok is not None
    assert ok.value == {"v": 1}
    await store.close()


# -- Redis replicas ------------------------------------------------------------------


async def test_a_wait_on_one_redis_replica_is_answered_by_a_named_put_through_the_other(
    redis_server: RedisServer,
) -> None:
    """Two stores sharing one Redis: a registry over A waits for a name; B puts it (and rank 7, which
    must not answer the wait for ``"7"``); A's waiter gets B's record, and A's feed heard the key."""
    from aiobootstrap.store.redis import RedisStore

    a = RedisStore(redis_server.url, **FAST)  # type: ignore[arg-type]
    b = RedisStore(redis_server.url, **FAST)  # type: ignore[arg-type]
    registry = await open_registry(a)
    heard_b = Recorder()
    await b.open(heard_b)
    try:
        waiting = asyncio.create_task(registry.wait(named("7"), GUARD))
        await until(lambda: registry.parked == 1)
        assert registry.parking.by_rank("default", KIND, DEFAULT_ROLE) == [], "a named wait is on no rank"
        await b.put(ranked(7), {"rank": 7})
        await asyncio.sleep(0.2)
        assert not waiting.done()
        put = await b.put(named("7"), {"name": "7"})
        assert await asyncio.wait_for(waiting, GUARD) == put
        assert await a.get(named("7")) == put
        odd = await a.put(named(ODD), {"v": 1})
        await heard_b.until(lambda: heard_b.heard(named(ODD), odd.version))
        assert await b.delete(named(ODD)) is not None
        assert await a.get(named(ODD)) is None
    finally:
        registry.close()
        await a.close()
        await b.close()


async def test_redis_keeps_a_name_in_a_field_no_rank_can_take(redis_server: RedisServer) -> None:
    """The table's fields: ``7`` for rank 7, ``:7`` for the name ``"7"``, ``:`` and the name in UTF-8."""
    import redis.asyncio as aioredis

    from aiobootstrap.store.redis import RedisStore

    store = RedisStore(redis_server.url, **FAST)  # type: ignore[arg-type]
    await store.open(Recorder())
    raw = aioredis.from_url(redis_server.url)
    try:
        await store.put(ranked(7), {"v": 1})
        await store.put(named("7"), {"v": 2})
        await store.put(named(ODD), {"v": 3})
        fields = await raw.hkeys("{aiobootstrap}:records:default:metadata:target")
        assert sorted(fields) == sorted([b"7", b":7", b":" + ODD.encode()])
    finally:
        await raw.aclose()
        await store.close()


async def test_a_named_record_on_a_lease_revoked_through_another_replica_leaves_both(
    redis_server: RedisServer,
) -> None:
    from aiobootstrap.store.redis import RedisStore

    a = RedisStore(redis_server.url, **FAST)  # type: ignore[arg-type]
    b = RedisStore(redis_server.url, **FAST)  # type: ignore[arg-type]
    heard_a = Recorder()
    await a.open(heard_a)
    await b.open(Recorder())
    try:
        lease = await a.grant_lease("default", 30)
        await a.put(named(SEGMENT), {"v": 1}, lease=lease.id)
        await a.put(named(ODD), {"v": 2}, lease=lease.id)
        await a.put(ranked(7), {"v": 3}, lease=lease.id)
        await a.put(named("7"), {"v": 4})
        targets = {(named(SEGMENT), None), (named(ODD), None), (ranked(7), None)}
        assert set((await b.read_lease("default", lease.id)).records) == targets
        held = await b.leases_of([(named(SEGMENT), None), (named(ODD), None), (named("7"), None)])
        assert [None if h is None else h[0] for h in held] == [lease.id, lease.id, None]
        assert set((await b.revoke_lease("default", lease.id)).records) == targets
        assert await a.get_many([named(SEGMENT), named(ODD), ranked(7)]) == [None, None, None]
        assert await a.get(named("7")) is not None
        await heard_a.until(lambda: any(c.deleted for c in heard_a.about(named(SEGMENT))))
    finally:
        await a.close()
        await b.close()


# -- the registry ---------------------------------------------------------------------


async def test_the_registry_waits_on_a_name_as_on_a_rank() -> None:
    """Parked on a name (counted, on no rank), woken by its put and not by the rank of the same digits;
    ``after`` waits for a newer one; a wait that runs out is ``None``."""
    registry = await open_registry()
    assert await registry.wait(named("7"), 0.05) is None
    waiting = asyncio.create_task(registry.wait(named("7"), GUARD))
    await until(lambda: registry.parked == 1)
    assert registry.parked_in("default") == 1
    assert registry.parking.by_rank("default", KIND, DEFAULT_ROLE) == []
    await registry.register(ranked(7), {"rank": 7})
    await asyncio.sleep(0)
    assert not waiting.done()
    first = await registry.register(named("7"), {"v": 1})
    assert await asyncio.wait_for(waiting, GUARD) == first
    assert registry.parked == 0
    assert registry.waiting_keys == 0
    newer = asyncio.create_task(registry.wait(named("7"), GUARD, after=first.version))
    await until(lambda: registry.parked == 1)
    second = await registry.register(named("7"), {"v": 2})
    assert await asyncio.wait_for(newer, GUARD) == second
    registry.close()


# -- the watch history and its wire -------------------------------------------------------


async def _history() -> tuple[MemoryStore, Registry, History]:
    store = MemoryStore()
    registry = Registry(store)
    history = History(store)
    await store.open(listeners(registry, history))
    await history.open()
    return store, registry, history


async def test_the_history_tells_a_named_change_by_its_key() -> None:
    store, _, history = await _history()
    await store.put(named(SEGMENT), {"v": 1})
    await store.put(Key("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE, 3), {"session_id": "s"})
    await store.delete(named(SEGMENT))
    changes, version = await history.since("default", 0, 0)
    assert version == 3
    assert changes == [
        LoggedChange("put", KIND, 1, DEFAULT_ROLE, NO_RANK, name=SEGMENT),
        LoggedChange("put", TRANSFER_ENGINE_INFO, 2, DEFAULT_ROLE, 3),
        LoggedChange("delete", KIND, 3, DEFAULT_ROLE, NO_RANK, name=SEGMENT),
    ]
    assert ChangeWords().described(changes) == [
        WatchedChange("put", KIND, 1, key=SEGMENT).as_json(),
        WatchedChange("put", TRANSFER_ENGINE_INFO, 2, role=DEFAULT_ROLE, rank=3).as_json(),
        WatchedChange("delete", KIND, 3, key=SEGMENT).as_json(),
    ]


def test_a_named_change_is_op_kind_key_version_on_the_wire_and_reads_back() -> None:
    """SPEC section 14's shape; a newline in the key stays escaped (an SSE event is one line of data)."""
    change = WatchedChange("put", KIND, 4, key=ODD)
    assert change.as_json() == {"op": "put", "kind": KIND, "key": ODD, "version": 4}
    assert json.loads(change.encode()) == change.as_json()
    assert b"\n" not in change.encode()
    assert sse_event(change).count(b"\n") == 3
    assert decode_change(json.loads(change.encode())) == change
    assert decode_watch(encode_watch([change], 4)).changes == (change,)
    for bad in ({"op": "put", "kind": KIND, "key": 3, "version": 1}, {"op": "put", "kind": KIND, "key": ""}):
        with pytest.raises(UnexpectedReply):
            decode_change(bad)


def test_rank_and_url_changes_keep_every_byte() -> None:
    assert WatchedChange("put", TRANSFER_ENGINE_INFO, 1, role="target", rank=3).encode() == (
        b'{"op":"put","kind":"transfer_engine_info","role":"target","rank":3,"version":1}'
    )
    assert WatchedChange("delete", ENCODER_URLS, 2, url="http://e1").encode() == (
        b'{"op":"delete","kind":"encoder_urls","url":"http://e1","version":2}'
    )


async def test_watch_serves_named_changes_and_its_ranks_filter_matches_none(client: Any) -> None:
    """Over HTTP (memory and Redis): ``/watch`` carries a named change as ``{op, kind, key, version}``;
    ``ranks=`` (and ``role=``) select rank changes only."""
    registry: Registry = client.app[REGISTRY]
    await registry.register(named("7"), {"v": 1})
    await registry.register(Key("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE, 7), {"session_id": "s"})
    every = await (await client.get("/watch", params={"after": "0", "wait": str(GUARD)})).json()
    expected = {"op": "put", "kind": KIND, "key": "7", "version": 1}
    if every["version"] < 2:  # over Redis the history hears the second write a moment later
        again = await client.get("/watch", params={"after": "1", "wait": str(GUARD)})
        every["changes"] += (await again.json())["changes"]
    assert every["changes"][0] == expected
    assert [c.get("rank") for c in every["changes"]] == [None, 7]
    for query in ({"ranks": "0-9"}, {"role": DEFAULT_ROLE}):
        only = await client.get("/watch", params={"after": "0", "wait": "0", **query})
        assert [c.get("key") for c in (await only.json())["changes"]] == [None]
