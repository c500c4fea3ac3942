"""The pre-built replies of watches and keepalives (``server/fastpath/watches.py``, ``server/fastpath/prebuilt.py``): aiohttp's bytes.

Raw HTTP/1.x over a socket to a real server, so what a watcher sees is
checked byte by byte against the same app with one more
``on_response_prepare`` hook (where every reply is aiohttp's own); then
watchers of different filters and positions, the waiter limit that counts
watchers, and a forgotten namespace's history freed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.appkeys import HISTORY
from aiobootstrap.server.fastpath.eligible import ELIGIBILITY

from .helpers.raw_http import VARIANTS, Reply, _closed, _connect, _read_reply, _request, _same
from .helpers.registry import register_in, registration
from .helpers.served_app import Served
from .helpers.served_app import fast as fast  # the module's fixtures, shared
from .helpers.served_app import plain as plain
from .helpers.served_app import served_config as served_config
from .helpers.waits import GUARD, until

REGISTER = "/register_transfer_engine_info"


def _watchers(served: Served) -> int:
    return served.app[HISTORY].watchers


async def _woken_watch(served: Served, variant: tuple[str, str, str], query: str) -> Reply:
    method, version, extra = variant
    reader, writer = await _connect(served)
    try:
        writer.write(_request(f"/watch?{query}&wait=10", method=method, version=version, extra=extra))
        await until(lambda: _watchers(served) == 1)
        await register_in(served.registry, 3)
        return await _read_reply(reader, head_only=method == "HEAD")
    finally:
        writer.close()


@pytest.mark.parametrize(
    "query", ["after=0", "after=0&kind=transfer_engine_info&ranks=0-7"], ids=["all", "filtered"]
)
@pytest.mark.parametrize("name", list(VARIANTS))
async def test_woken_watch_reply_is_what_aiohttp_sends(
    fast: Served, plain: Served, name: str, query: str
) -> None:
    """A long-poll woken by a change: status line, every header (but Date's and the boot id's values), body."""
    assert fast.app[ELIGIBILITY].allowed
    assert not plain.app[ELIGIBILITY].allowed
    ours = await _woken_watch(fast, VARIANTS[name], query)
    theirs = await _woken_watch(plain, VARIANTS[name], query)
    _same(ours, theirs)
    if VARIANTS[name][0] == "GET":
        assert json.loads(ours.body)["changes"][0]["rank"] == 3


async def test_connection_close_watch_is_closed_after_its_reply(fast: Served) -> None:
    """``Connection: close`` says so in the bytes, and the connection ends after them."""
    reader, writer = await _connect(fast)
    writer.write(_request("/watch?after=0&wait=10", extra="Connection: close\r\n"))
    await until(lambda: _watchers(fast) == 1)
    await register_in(fast.registry, 1)
    reply = await _read_reply(reader)
    assert reply.headers["Connection"] == "close"
    assert await _closed(reader)
    writer.close()


async def test_woken_watch_connection_serves_the_next_request(fast: Served) -> None:
    """Keep-alive: the next request on the connection is answered after the pre-built reply."""
    reader, writer = await _connect(fast)
    writer.write(_request("/watch?after=0&wait=10"))
    await until(lambda: _watchers(fast) == 1)
    await register_in(fast.registry, 1)
    first = await _read_reply(reader)
    writer.write(_request("/watch?after=0&wait=0"))
    second = await _read_reply(reader)
    assert json.loads(first.body) == json.loads(second.body)
    writer.close()


async def _stream_bytes(served: Served, query: str) -> bytes:
    """The raw bytes a stream gets for one change after it is up: its chunk, as the wire carries it."""
    reader, writer = await _connect(served)
    try:
        writer.write(_request(f"/watch?{query}", extra="Accept: text/event-stream\r\n"))
        async with asyncio.timeout(GUARD):
            await reader.readuntil(b"\r\n\r\n")
            await reader.readuntil(b": ping\n\n\r\n")  # the first chunk: the stream is up
            await until(lambda: _watchers(served) == 1)
            await register_in(served.registry, 5)
            return await reader.readuntil(b"\n\n\r\n")
    finally:
        writer.close()


@pytest.mark.parametrize("query", ["after=0", "after=0&ranks=5-6"], ids=["all", "filtered"])
async def test_stream_events_are_what_aiohttp_sends(fast: Served, plain: Served, query: str) -> None:
    """A stream's events, framed and chunked by the fast path, are the bytes aiohttp's writer sends."""
    ours = await _stream_bytes(fast, query)
    theirs = await _stream_bytes(plain, query)
    assert b"id: 1\ndata: " in ours
    assert ours == theirs


async def test_groups_of_other_filters_and_positions_each_get_their_own(client: Any) -> None:
    """Watchers of several filters and ``after``s, long-poll and stream, each get exactly their changes."""
    for rank in (0, 1):
        assert (await client.put(REGISTER, json=registration(rank))).status == 200
    history = client.app[HISTORY]
    queries = {
        "every": "after=2",
        "rank 7": "after=2&ranks=7",
        "rank 8": "after=2&ranks=8",
        "from 1": "after=1&ranks=7",
        "configs": "after=2&kind=parallelism_config",
    }
    polls = {
        name: [asyncio.create_task(client.get(f"/watch?{query}&wait=10")) for _ in range(3)]
        for name, query in queries.items()
    }
    stream = await client.get("/watch?after=2&ranks=8", headers={"Accept": "text/event-stream"})
    await until(lambda: history.watchers == 16)
    assert (await client.put(REGISTER, json=registration(7))).status == 200
    for name in ("every", "rank 7", "from 1"):
        for task in polls[name]:
            body = await (await task).json()
            assert [change["version"] for change in body["changes"]] == [3]
            assert body["version"] == 3
    assert not any(task.done() for task in polls["rank 8"] + polls["configs"])
    assert (await client.put(REGISTER, json=registration(8))).status == 200
    for task in polls["rank 8"]:
        assert [change["rank"] for change in (await (await task).json())["changes"]] == [8]
    seen = b""
    async with asyncio.timeout(GUARD):
        while b"id: 4\n" not in seen:
            seen += await stream.content.readany()
    assert b"id: 3\n" not in seen, "the stream filtered to rank 8 is not told of rank 7"
    stream.close()
    for task in polls["configs"]:
        task.cancel()


# -- the waiter limit ----------------------------------------------------------


async def test_watchers_count_against_the_waiter_limit(aiohttp_client: Any) -> None:
    """Parked watches and gets share --max-waiters: past it a watch or a get is the same 503 with Retry-After."""
    client = await aiohttp_client(
        create_app(ServerConfig(max_waiters=2)), server_kwargs={"handler_cancellation": True}
    )
    history = client.app[HISTORY]
    watch = asyncio.create_task(client.get("/watch?after=0&wait=30"))
    stream = await client.get("/watch?after=0", headers={"Accept": "text/event-stream"})
    await until(lambda: history.watchers == 2)
    for path in ("/watch?after=0&wait=30", "/get_transfer_engine_info?rank=0&wait=30"):
        refused = await client.get(path)
        assert refused.status == 503
        assert float(refused.headers["Retry-After"]) > 0
        assert "limit" in (await refused.json())["detail"]
    refused = await client.get("/watch?after=0", headers={"Accept": "text/event-stream"})
    assert refused.status == 503, "a stream over the limit is refused before it starts"
    assert (await client.get("/watch?after=0&wait=0")).status == 200, (
        "a watch that does not wait is never refused"
    )
    stream.close()
    assert (await client.put(REGISTER, json=registration(0))).status == 200
    assert (await watch).status == 200
    await until(lambda: history.watchers == 0)
    assert (await client.get("/watch?after=0&wait=0.01")).status == 200


# -- a forgotten namespace -------------------------------------------------------


async def test_a_forgotten_namespaces_history_is_freed(client: Any) -> None:
    """A namespace emptied is forgotten by the history too (here with no grace); a watcher from before is told
    410, one at its last version goes on."""
    history = client.app[HISTORY]
    history.forgetting.grace = 0.0
    path = "/ns/brief/register_transfer_engine_info"
    for number in range(30):
        namespace = f"/ns/gone{number}"
        assert (
            await client.put(f"{namespace}/register_transfer_engine_info", json=registration(0))
        ).status == 200
        assert (
            await client.delete(f"{namespace}/register_transfer_engine_info", params={"rank": "0"})
        ).status == 200
    await until(lambda: not any(name.startswith("gone") for name in history._logs))
    assert (await client.put(path, json=registration(0))).status == 200
    assert (await client.delete(path, params={"rank": "0"})).status == 200
    last = (await (await client.get("/ns/brief/watch?after=0&wait=0")).json())["version"]
    await until(lambda: "brief" not in history._logs)
    gone = await client.get("/ns/brief/watch?after=0&wait=0")
    assert gone.status == 410
    assert (await gone.json())["version"] >= last
    waiting = asyncio.create_task(client.get(f"/ns/brief/watch?after={last}&wait=10"))
    await until(lambda: history.watchers == 1)
    assert (await client.put(path, json=registration(1))).status == 200
    changes = (await (await waiting).json())["changes"]
    assert [(change["op"], change["rank"]) for change in changes] == [("put", 1)]


# -- a keepalive's pre-built 200 --------------------------------------------------


async def _keepalive(served: Served, variant: tuple[str, str, str]) -> Reply:
    _, version, extra = variant
    reader, writer = await _connect(served)
    try:
        body = b'{"ttl": 30}'
        head = f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        writer.write(_request("/leases", method="POST", extra=head) + body)
        lease = json.loads((await _read_reply(reader)).body)["lease"]
        writer.write(_request(f"/leases/{lease}/keepalive", method="POST", version=version, extra=extra))
        reply = await _read_reply(reader)
        assert json.loads(reply.body) == {"lease": lease, "ttl": 30}
        reply.body = reply.body.replace(lease.encode(), b"ID")
        return reply
    finally:
        writer.close()


@pytest.mark.parametrize("name", [name for name in VARIANTS if not name.startswith("HEAD")])
async def test_keepalive_reply_is_what_aiohttp_sends(fast: Served, plain: Served, name: str) -> None:
    """``POST /leases/ID/keepalive``'s pre-built bytes: the same status line, headers and body as aiohttp's reply."""
    ours = await _keepalive(fast, VARIANTS[name])
    theirs = await _keepalive(plain, VARIANTS[name])
    _same(ours, theirs)


async def test_forgotten_namespaces_logs_are_bounded_and_a_watcher_between_polls_misses_nothing(
    client: Any,
) -> None:
    """Within its grace a forgotten namespace's log is kept, so a watcher behind its last delete is told it; past
    ``kept`` forgotten namespaces the oldest logs are freed, however young."""
    history = client.app[HISTORY]
    history.forgetting.kept = 4
    path = "/ns/between/register_transfer_engine_info"
    assert (await client.put(path, json=registration(0))).status == 200
    assert (await client.delete(path, params={"rank": "0"})).status == 200
    await until(lambda: "between" in history.forgetting.forgotten)
    reply = await client.get("/ns/between/watch?after=1&wait=0")
    assert reply.status == 200
    assert [change["op"] for change in (await reply.json())["changes"]] == ["delete"]
    for number in range(30):
        churned = f"/ns/churn{number}/register_transfer_engine_info"
        assert (await client.put(churned, json=registration(0))).status == 200
        assert (await client.delete(churned, params={"rank": "0"})).status == 200
    await until(lambda: "churn29" in history.forgetting.forgotten)
    assert len(history.forgetting.forgotten) <= 4
    assert "between" not in history._logs
    assert sum(name.startswith("churn") for name in history._logs) <= 4
