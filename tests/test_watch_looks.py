"""The page's watch (``&waits=N&findings=M``) on the watch fast path (``server/fastpath/watches.py``).

Raw HTTP/1.x to a real server: a parked watch told counts is answered when a
wait parks, when a probe round changes a finding and when a record changes,
in the bytes aiohttp sends for the same app with one more
``on_response_prepare`` hook (which takes the slow way, ``watch_counts``);
a group of them is encoded once and each member answered once, with no task
of its own; a ``410`` and the waiter limit hold as before.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.appkeys import HISTORY, REGISTRY
from aiobootstrap.server.faces.encoders.health import ENCODER_HEALTH, add_url
from aiobootstrap.server.faces.encoders.settings import EncoderSettings
from aiobootstrap.server.fastpath.eligible import ELIGIBILITY
from aiobootstrap.store import Change
from aiobootstrap.wire.watch import encode_watch
from testbed.redis_server import free_port

from .helpers.raw_http import VARIANTS, Reply, _connect, _read_reply, _request, _same
from .helpers.registry import info_key, register_in
from .helpers.served_app import Served
from .helpers.served_app import fast as fast  # the module's fixtures, shared (its config overridden below)
from .helpers.served_app import plain as plain
from .helpers.waits import until

CONFIG = ServerConfig(settings=(EncoderSettings(encoder_health_interval=3600),))
"""Probing on, its rounds only those a test runs (``EncoderHealth.round``)."""

WAIT = 60
"""Longer than the guard of every read: a watch the fast path did not answer fails the test, never passes late."""


@pytest.fixture
def served_config() -> ServerConfig:
    return CONFIG


def _watchers(served: Served) -> int:
    return served.app[HISTORY].watchers


_ENCODE_WATCH = "aiobootstrap.server.change_words.encode_watch"
"""Where a long-poll's reply is encoded (``ChangeWords.reply``), as the test counts it."""


def _looks(served: Served, after: int, wait: float = WAIT) -> str:
    """The page's query: the counts as they are now."""
    moves, findings = (
        served.registry.parking.wait_changes.count,
        served.app[ENCODER_HEALTH].probe_changes.count,
    )
    return f"/watch?after={after}&wait={wait:g}&waits={moves}&findings={findings}"


async def _a_wait_parks(served: Served) -> asyncio.Task[Any]:
    """A get parks (one move); the caller lets it go once the watch's reply is read."""
    get = asyncio.create_task(served.registry.wait(info_key(7), WAIT))
    await until(lambda: served.registry.parked == 1)
    return get


async def _a_finding_changes(served: Served) -> None:
    await served.app[ENCODER_HEALTH].round()  # the dead URL fails its first probe


async def _a_record_changes(served: Served) -> None:
    await register_in(served.registry, 3)


TRIGGERS: dict[str, Callable[[Served], Awaitable[asyncio.Task[Any] | None]]] = {
    "wait": _a_wait_parks,
    "finding": _a_finding_changes,
    "change": _a_record_changes,
}


async def _let_go(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _woken(served: Served, variant: tuple[str, str, str], trigger: str) -> Reply:
    method, version, extra = variant
    # A URL nothing answers: its list change is version 1, before the watch; its first probe a finding.
    await add_url(served.registry, "default", f"http://127.0.0.1:{free_port()}")
    reader, writer = await _connect(served)
    try:
        writer.write(_request(_looks(served, 1), method=method, version=version, extra=extra))
        await until(lambda: _watchers(served) == 1)
        parked = await TRIGGERS[trigger](served)
        try:
            return await _read_reply(reader, head_only=method == "HEAD")
        finally:
            await _let_go(parked)
    finally:
        writer.close()


@pytest.mark.parametrize("trigger", list(TRIGGERS))
@pytest.mark.parametrize("name", list(VARIANTS))
async def test_a_page_watch_is_answered_in_aiohttps_bytes(
    fast: Served, plain: Served, name: str, trigger: str
) -> None:
    """Woken by a wait, a finding or a change: status line, every header (but Date's and the boot id's
    values) and body are those the slow way sends through aiohttp."""
    assert fast.app[ELIGIBILITY].allowed
    assert not plain.app[ELIGIBILITY].allowed
    ours = await _woken(fast, VARIANTS[name], trigger)
    theirs = await _woken(plain, VARIANTS[name], trigger)
    _same(ours, theirs)
    if VARIANTS[name][0] == "GET":
        body = json.loads(ours.body)
        assert set(body) == {"changes", "version", "waits", "findings"}
        assert [change["rank"] for change in body["changes"]] == ([3] if trigger == "change" else [])
        assert (body["waits"] > 0) == (trigger == "wait")
        assert (body["findings"] > 0) == (trigger == "finding")


async def test_a_watch_group_is_encoded_once_and_each_answered_once_with_no_task_of_its_own(
    fast: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty page watches told the same counts park with no more tasks than twenty plain watches; a
    wait parking answers them with one encoded reply, each once (the next request on each connection
    gets its own reply), and leaves a plain watch of the same position parked."""
    connections = [await _connect(fast) for _ in range(21)]
    looks = _request(_looks(fast, 0))
    for _, writer in connections[:20]:
        writer.write(looks)
    connections[20][1].write(_request(f"/watch?after=0&wait={WAIT}"))
    await until(lambda: _watchers(fast) == 21)
    with_looks = len(asyncio.all_tasks())
    encoded = []
    real = encode_watch

    def counted(*args: Any, **kwargs: Any) -> bytes:
        encoded.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(_ENCODE_WATCH, counted)
    parked = await _a_wait_parks(fast)
    bodies = [(await _read_reply(reader)).body for reader, _ in connections[:20]]
    assert len(encoded) == 1
    assert len(set(bodies)) == 1
    assert json.loads(bodies[0])["waits"] == fast.registry.parking.wait_changes.count
    await _let_go(parked)
    await until(lambda: _watchers(fast) == 1)
    monkeypatch.setattr(_ENCODE_WATCH, real)
    for _, writer in connections[:20]:
        writer.write(_request(f"/watch?after=0&wait={WAIT}"))
    await until(lambda: _watchers(fast) == 21)
    assert len(asyncio.all_tasks()) == with_looks, "a parked page watch costs what a plain one does"
    await register_in(fast.registry, 1)
    for reader, _ in connections:
        body = json.loads((await _read_reply(reader)).body)
        assert "waits" not in body, "the plain watch's own reply, not a second answer to the first"
        assert [change["rank"] for change in body["changes"]] == [1]
    for _, writer in connections:
        writer.close()


async def test_counts_already_moved_are_answered_at_once(fast: Served) -> None:
    """Told counts behind the server's: answered at once, with the counts now (no wait parks)."""
    told = _looks(fast, 0)
    await _let_go(await _a_wait_parks(fast))
    reader, writer = await _connect(fast)
    writer.write(_request(told))
    body = json.loads((await _read_reply(reader)).body)
    assert body == {
        "changes": [],
        "version": 0,
        "waits": fast.registry.parking.wait_changes.count,
        "findings": 0,
    }
    writer.close()


@pytest.mark.parametrize("way", ["fast", "plain"])
async def test_a_page_watch_whose_history_went_is_410(fast: Served, plain: Served, way: str) -> None:
    """The feed may have missed changes while a page watch was parked: it is told 410, either way."""
    served = fast if way == "fast" else plain
    await register_in(served.registry, 0)
    reader, writer = await _connect(served)
    writer.write(_request(_looks(served, 1)))
    await until(lambda: _watchers(served) == 1)
    history = served.app[HISTORY]
    history.resync()
    history.changed([Change(info_key(0), 3)])  # version 2 was missed
    parked = await _a_wait_parks(served)  # a move too: nothing may answer it 200
    reply = await _read_reply(reader)
    await _let_go(parked)
    assert reply.status_line.endswith("410 Gone")
    assert json.loads(reply.body)["detail"]
    writer.close()


async def test_a_page_watch_counts_against_the_waiter_limit(aiohttp_client: Any) -> None:
    """A parked page watch is one of --max-waiters: a get past it is a 503, and so is another watch."""
    client = await aiohttp_client(
        create_app(ServerConfig(max_waiters=1)), server_kwargs={"handler_cancellation": True}
    )
    moves = client.app[REGISTRY].parking.wait_changes.count
    watch = asyncio.create_task(client.get(f"/watch?after=0&waits={moves}&wait={WAIT}"))
    await until(lambda: client.app[HISTORY].watchers == 1)
    for path in ("/get_transfer_engine_info?rank=0&wait=30", f"/watch?after=0&waits={moves}&wait=30"):
        refused = await client.get(path)
        assert refused.status == 503, path
        assert "limit" in (await refused.json())["detail"]
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)
