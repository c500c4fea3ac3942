"""client.watch(): an async iterator of changes that resumes across reconnects, restarts and a 410."""

from __future__ import annotations

import asyncio

from aiobootstrap import BootstrapClient, BootstrapServer, ServerConfig, SyncBootstrapClient, WatchedChange
from aiobootstrap.server.appkeys import HISTORY

from .helpers.clients import _restart
from .helpers.waits import GUARD, until


async def _take(changes, count: int) -> list[WatchedChange]:
    taken: list[WatchedChange] = []
    async with asyncio.timeout(GUARD):
        async for change in changes:
            taken.append(change)
            if len(taken) == count:
                break
    return taken


async def test_watch_yields_puts_and_deletes_in_order():
    """Registrations, unregisters and encoder URLs come as typed changes, oldest first, as they happen."""
    async with BootstrapServer(port=0) as server, BootstrapClient(server.url) as client:
        await client.register(0, session_id="a", weights_info_dict={})
        changes = client.watch()
        first = await _take(changes, 1)
        assert first == [WatchedChange("put", "transfer_engine_info", 1, role="target", rank=0)]
        await client.unregister(0)
        await client.register_encoder_url("http://e")
        assert await _take(changes, 2) == [
            WatchedChange("delete", "transfer_engine_info", 2, role="target", rank=0),
            WatchedChange("put", "encoder_urls", 3, url="http://e"),
        ]
        await changes.aclose()  # type: ignore[attr-defined]


async def test_watch_filters():
    async with BootstrapServer(port=0) as server, BootstrapClient(server.url) as client:
        await client.register(0, session_id="a", weights_info_dict={})
        await client.register(1, session_id="b", weights_info_dict={}, role="draft")
        await client.register_parallelism_config(1, {"tp": 1})
        changes = client.watch(kind="transfer_engine_info", ranks=[1])
        assert [(c.rank, c.role) for c in await _take(changes, 1)] == [(1, "draft")]


async def test_watch_goes_on_across_a_server_restart():
    """A watcher parked while the in-memory server restarts re-reads the listing there and goes on.

    It is told that rank 0 is gone (a delete, the restarted server being empty), then the new
    server's changes, numbered from 1 again.
    """
    server = await BootstrapServer(port=0).__aenter__()
    try:
        async with BootstrapClient(server.url) as client:
            await client.register(0, session_id="a", weights_info_dict={})
            await client.register(1, session_id="a", weights_info_dict={})
            changes = client.watch()
            assert [c.rank for c in await _take(changes, 2)] == [0, 1]
            following = asyncio.create_task(_take(changes, 2))
            await until(lambda: server.app[HISTORY].watchers == 1)
            server = await _restart(server)
            gone = await asyncio.wait_for(following, GUARD)
            assert sorted((c.op, c.rank) for c in gone) == [("delete", 0), ("delete", 1)]
            await client.register(5, session_id="b", weights_info_dict={})
            assert await _take(changes, 1) == [
                WatchedChange("put", "transfer_engine_info", 1, role="target", rank=5)
            ]
    finally:
        await server.close()


async def test_a_410_is_handled_by_re_reading_the_listing():
    """A watch from a version older than the history yields the listing's difference, then goes on."""
    config = ServerConfig(port=0, watch_history=2)
    async with BootstrapServer(config) as server, BootstrapClient(server.url) as client:
        for rank in range(4):
            await client.register(rank, session_id=str(rank), weights_info_dict={})
        await client.unregister(3)
        changes = client.watch()
        got = await _take(changes, 3)
        assert sorted((c.op, c.rank) for c in got) == [("put", 0), ("put", 1), ("put", 2)]
        await client.register(7, session_id="7", weights_info_dict={})
        assert [(c.op, c.rank) for c in await _take(changes, 1)] == [("put", 7)]


def test_the_sync_watch_takes_what_the_async_one_takes():
    """SyncBootstrapClient.watch, written out, keeps BootstrapClient.watch's parameters."""
    import inspect

    sync = inspect.signature(SyncBootstrapClient.watch).parameters
    async_ = inspect.signature(BootstrapClient.watch).parameters
    assert list(sync) == list(async_)
    assert all(sync[name].default == async_[name].default for name in sync if name != "self")


def test_the_sync_client_watches_with_a_generator():
    """SyncBootstrapClient.watch is a plain generator; leaving the loop closes it."""

    async def serve(ready: asyncio.Future[str], stop: asyncio.Event) -> None:
        async with BootstrapServer(port=0) as server:
            ready.set_result(server.url)
            await stop.wait()

    loop = asyncio.new_event_loop()
    import threading

    ready: asyncio.Future[str] = loop.create_future()
    stop = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(ready, stop),), daemon=True)
    thread.start()
    try:
        url = asyncio.run_coroutine_threadsafe(asyncio.wait_for(asyncio.shield(ready), GUARD), loop).result()
        with SyncBootstrapClient(url) as client:
            client.register(2, session_id="s", weights_info_dict={})
            for change in client.watch():
                assert (change.op, change.rank, change.version) == ("put", 2, 1)
                break
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(GUARD)
        loop.close()
