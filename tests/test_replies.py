"""A get's 200 written as pre-built bytes (``server/fastpath/gets.py``) stays an aiohttp reply on the wire.

Each test speaks raw HTTP/1.x over a socket to a real server, so what a
client sees is checked byte by byte: the same headers as aiohttp's own reply,
keep-alive, pipelining, HEAD, HTTP/1.0, ``Connection: close``, a client gone
while parked, the access log.
"""

from __future__ import annotations

import asyncio
import json
import logging
from unittest import mock

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.app import GET_REPLIES, REGISTRY
from aiobootstrap.server.fastpath.eligible import ELIGIBILITY
from aiobootstrap.server.fastpath.gets import FEW_WOKEN, GetReplies, PendingGet
from aiobootstrap.store import Key, Record

from .helpers.raw_http import VARIANTS, Reply, _closed, _connect, _read_reply, _request, _same
from .helpers.registry import register_in
from .helpers.served_app import Served, _serve
from .helpers.served_app import fast as fast  # the module's fixtures, shared
from .helpers.served_app import plain as plain
from .helpers.served_app import served_config as served_config
from .helpers.waits import until

GET = "/get_transfer_engine_info"


async def _register(served: Served, rank: int, session: str = "s") -> None:
    await register_in(served.registry, rank, session, {"w": [1, 2, 3]})


async def _parked(served: Served, count: int = 1) -> None:
    await until(lambda: served.registry.parked == count)


def _wait_path(rank: int) -> str:
    return f"{GET}?rank={rank}&wait=10"


# -- the same bytes as aiohttp's own ------------------------------------


async def _one(served: Served, rank: int, variant: tuple[str, str, str], *, woken: bool) -> Reply:
    method, version, extra = variant
    reader, writer = await _connect(served)
    try:
        path = _wait_path(rank) if woken else f"{GET}?rank={rank}"
        writer.write(_request(path, method=method, version=version, extra=extra))
        if woken:
            await _parked(served)
            await _register(served, rank)
        return await _read_reply(reader, head_only=method == "HEAD")
    finally:
        writer.close()


@pytest.mark.parametrize("woken", [True, False], ids=["woken", "hit"])
@pytest.mark.parametrize("name", list(VARIANTS))
async def test_prebuilt_reply_is_what_aiohttp_sends(
    fast: Served, plain: Served, name: str, woken: bool
) -> None:
    """Status line, every header (but the Date's and the boot id's values) and body match aiohttp's reply."""
    assert fast.app[ELIGIBILITY].allowed
    assert not plain.app[ELIGIBILITY].allowed
    for served in (fast, plain):
        if not woken:
            await _register(served, 3)
    ours = await _one(fast, 3, VARIANTS[name], woken=woken)
    theirs = await _one(plain, 3, VARIANTS[name], woken=woken)
    _same(ours, theirs)
    if VARIANTS[name][0] == "GET":
        assert json.loads(ours.body)["remote_instance_transfer_engine_info"][0] == "s"


async def test_prebuilt_reply_names_the_boot_and_the_version(fast: Served) -> None:
    """The bytes carry the store's incarnation and the record's version, and a well-formed Date."""
    reply = await _one(fast, 4, VARIANTS["1.1 keep-alive"], woken=True)
    assert reply.headers["X-Aiobootstrap-Boot"] == fast.registry.store.incarnation
    assert reply.headers["X-Aiobootstrap-Version"] == str(json.loads(reply.body)["version"])
    assert reply.headers["Date"].endswith(" GMT")
    assert reply.headers["Server"] == aiohttp.http.SERVER_SOFTWARE


# -- the connection goes on as aiohttp would have it --------------------


async def test_woken_waiter_connection_stays_alive(fast: Served) -> None:
    """After a woken waiter's reply, the same connection answers another request."""
    reader, writer = await _connect(fast)
    writer.write(_request(_wait_path(5)))
    await _parked(fast)
    await _register(fast, 5)
    first = await _read_reply(reader)
    assert first.status_line == "HTTP/1.1 200 OK"
    assert "Connection" not in first.headers
    writer.write(_request(f"{GET}?rank=5"))
    second = await _read_reply(reader)
    assert second.status_line == "HTTP/1.1 200 OK"
    assert second.body == first.body
    writer.close()


async def test_request_pipelined_behind_a_parked_one_is_answered_after_it(fast: Served) -> None:
    """A request sent behind a parked wait, on the same connection, is answered after the wait's reply."""
    await _register(fast, 7, "seven")
    reader, writer = await _connect(fast)
    writer.write(_request(_wait_path(6)) + _request(f"{GET}?rank=7"))
    await _parked(fast)
    await _register(fast, 6, "six")
    first = await _read_reply(reader)
    second = await _read_reply(reader)
    assert json.loads(first.body)["remote_instance_transfer_engine_info"][0] == "six"
    assert json.loads(second.body)["remote_instance_transfer_engine_info"][0] == "seven"
    writer.close()


async def test_head_of_a_woken_waiter_has_no_body(fast: Served) -> None:
    """HEAD waits like GET, and its reply is the head alone: the next reply on the connection parses."""
    reader, writer = await _connect(fast)
    writer.write(_request(_wait_path(8), method="HEAD"))
    await _parked(fast)
    await _register(fast, 8)
    head = await _read_reply(reader, head_only=True)
    assert head.status_line == "HTTP/1.1 200 OK"
    assert int(head.headers["Content-Length"]) > 0
    writer.write(_request(f"{GET}?rank=8"))
    full = await _read_reply(reader)
    assert full.status_line == "HTTP/1.1 200 OK"
    assert len(full.body) == int(head.headers["Content-Length"])
    writer.close()


async def test_http10_woken_waiter_is_answered_in_10_and_closed(fast: Served) -> None:
    """An HTTP/1.0 request without keep-alive gets an HTTP/1.0 reply, then the server closes."""
    reader, writer = await _connect(fast)
    writer.write(_request(_wait_path(9), version="1.0"))
    await _parked(fast)
    await _register(fast, 9)
    reply = await _read_reply(reader)
    assert reply.status_line == "HTTP/1.0 200 OK"
    assert "Connection" not in reply.headers
    assert await _closed(reader)
    writer.close()


async def test_http10_keep_alive_woken_waiter_stays_open(fast: Served) -> None:
    """HTTP/1.0 asking for keep-alive gets Connection: keep-alive, and the connection serves again."""
    reader, writer = await _connect(fast)
    writer.write(_request(_wait_path(10), version="1.0", extra="Connection: keep-alive\r\n"))
    await _parked(fast)
    await _register(fast, 10)
    reply = await _read_reply(reader)
    assert reply.headers["Connection"] == "keep-alive"
    writer.write(_request(f"{GET}?rank=10", version="1.0", extra="Connection: keep-alive\r\n"))
    again = await _read_reply(reader)
    assert again.body == reply.body
    writer.close()


async def test_connection_close_woken_waiter_says_so_and_closes(fast: Served) -> None:
    """Connection: close is answered with Connection: close, and the server closes after the reply."""
    reader, writer = await _connect(fast)
    writer.write(_request(_wait_path(11), extra="Connection: close\r\n"))
    await _parked(fast)
    await _register(fast, 11)
    reply = await _read_reply(reader)
    assert reply.headers["Connection"] == "close"
    assert await _closed(reader)
    writer.close()


async def test_client_gone_while_parked_leaves_nothing_and_others_are_answered(fast: Served) -> None:
    """A waiter whose client hung up is dropped (no early reply left behind); the others get theirs."""
    _, gone = await _connect(fast)
    stays_reader, stays = await _connect(fast)
    gone.write(_request(_wait_path(12)))
    stays.write(_request(_wait_path(12)))
    await _parked(fast, 2)
    gone.close()
    await until(lambda: fast.registry.parked == 1)
    [expecting] = fast.app[GET_REPLIES]._expecting.values()
    assert len(expecting) == 1
    await _register(fast, 12)
    reply = await _read_reply(stays_reader)
    assert reply.status_line == "HTTP/1.1 200 OK"
    await until(lambda: fast.registry.parked == 0 and fast.registry.waiting_keys == 0)
    assert fast.app[GET_REPLIES]._expecting == {}
    stays.close()


async def test_client_gone_after_delivery_before_its_write_is_skipped(fast: Served) -> None:
    """A connection closed between the registration and its early write is not written to, nor fails."""
    reader, writer = await _connect(fast)
    writer.write(_request(_wait_path(13)))
    await _parked(fast)
    # Close the server's side of the connection in the same step as the registration:
    # the early write, one loop turn later, finds the transport closing.
    [pending] = fast.app[GET_REPLIES]._expecting.values()
    [early] = list(pending)
    assert isinstance(early, PendingGet)
    transport = early.request.transport
    assert transport is not None
    transport.close()
    await _register(fast, 13)
    assert await _closed(reader)
    await until(lambda: fast.registry.parked == 0 and fast.registry.waiting_keys == 0)
    assert early.sent == 0
    writer.close()


async def test_access_log_shows_the_woken_waiters_status_and_bytes(caplog: pytest.LogCaptureFixture) -> None:
    """With access logging on, a woken waiter's line has status 200 and the bytes actually sent."""
    caplog.set_level(logging.INFO, logger="test.access")
    async for served in _serve(create_app(ServerConfig()), access_log=logging.getLogger("test.access")):
        reader, writer = await _connect(served)
        writer.write(_request(_wait_path(14)))
        await _parked(served)
        await _register(served, 14)
        reply = await _read_reply(reader)
        writer.close()
        await until(lambda: any(r.name == "test.access" for r in caplog.records))
    [line] = [r.getMessage() for r in caplog.records if r.name == "test.access"]
    head_size = len(_head_bytes(reply))
    assert f'"GET {_wait_path(14)} HTTP/1.1" 200 {head_size + len(reply.body)} ' in line


def _head_bytes(reply: Reply) -> bytes:
    lines = [reply.status_line, *(f"{k}: {v}" for k, v in reply.headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def test_another_prepare_hook_still_sees_woken_replies(plain: Served) -> None:
    """With a hook of someone else's on on_response_prepare, gets take aiohttp's path and the hook runs."""
    seen: list[int] = []

    async def hook(request: web.Request, response: web.StreamResponse) -> None:
        seen.append(response.status)

    # The plain fixture's app is frozen: check what its flag says, and that its replies went through hooks.
    assert not plain.app[ELIGIBILITY].allowed
    reply = await _one(plain, 15, VARIANTS["1.1 keep-alive"], woken=True)
    assert reply.status_line == "HTTP/1.1 200 OK"
    app = create_app(ServerConfig())
    app.on_response_prepare.append(hook)
    async for served in _serve(app):
        await _one(served, 16, VARIANTS["1.1 keep-alive"], woken=True)
    assert seen == [200]


@pytest.mark.parametrize("name", [name for name in VARIANTS if not name.startswith("HEAD")])
async def test_registration_ok_is_what_aiohttp_sends(fast: Served, plain: Served, name: str) -> None:
    """A registration's pre-built 200 OK matches aiohttp's text="OK" reply, header by header."""
    _, version, extra = VARIANTS[name]
    body = json.dumps({"rank": 1, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {}}})
    replies = []
    for served in (fast, plain):
        reader, writer = await _connect(served)
        head = f"PUT /register_transfer_engine_info HTTP/{version}\r\nHost: test\r\n{extra}"
        writer.write(f"{head}Content-Length: {len(body)}\r\n\r\n{body}".encode())
        replies.append(await _read_reply(reader))
        writer.close()
    ours, theirs = replies
    assert (ours.status_line, ours.body) == (theirs.status_line, theirs.body) == (theirs.status_line, b"OK")
    for header in ("Date", "X-Aiobootstrap-Boot"):
        assert ours.headers.pop(header)
        assert theirs.headers.pop(header)
    assert ours.headers == theirs.headers


async def test_woken_waiter_of_a_large_reply_gets_it_whole(fast: Served) -> None:
    """A reply past the separate-body size is left to the handler (flow control), and arrives whole."""
    weights = {f"layers.{i}.weight": [140234567890123 + i, 8388608, 2] for i in range(10_000)}
    reader, writer = await _connect(fast)
    writer.write(_request(_wait_path(17)))
    await _parked(fast)
    await register_in(fast.registry, 17, "big", weights)
    reply = await _read_reply(reader)
    assert reply.status_line == "HTTP/1.1 200 OK"
    assert len(reply.body) > 256 * 1024
    assert json.loads(reply.body)["remote_instance_transfer_engine_info"] == ["big", weights]
    writer.write(_request(f"{GET}?rank=17"))
    again = await _read_reply(reader)
    assert again.body == reply.body
    writer.close()


def test_replies_follow_a_new_boot_id_at_once() -> None:
    """A new boot id (a flushed Redis) is in the very next reply, not a second later."""
    boot = ["first"]
    replies = GetReplies(lambda record: b"{}", lambda: boot[0])
    record = Record(Key("default", "transfer_engine_info", "target", 0), {}, 7, 0.0)
    data, _ = replies.parts(record, 0)
    assert b"X-Aiobootstrap-Boot: first\r\n" in data
    assert b"X-Aiobootstrap-Version: 7\r\n" in data
    boot[0] = "second"
    data, _ = replies.parts(record, 0)
    assert b"X-Aiobootstrap-Boot: second\r\n" in data
    assert b"X-Aiobootstrap-Boot: second\r\n" in replies.ok(0)


async def test_mounted_as_a_sub_app_the_outer_apps_hooks_still_run() -> None:
    """Under another app (add_subapp), replies take aiohttp's path, so the outer app's prepare hook runs."""

    async def stamp(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["X-Outer"] = "yes"

    outer = web.Application()
    outer.on_response_prepare.append(stamp)
    inner = create_app(ServerConfig())
    outer.add_subapp("/inner", inner)
    async for served in _serve(outer):
        registry = inner[REGISTRY]
        reader, writer = await _connect(served)
        writer.write(_request("/inner" + _wait_path(18)))
        await until(lambda registry=registry: registry.parked == 1)  # type: ignore[misc]
        await register_in(registry, 18, "s", {})
        reply = await _read_reply(reader)
        writer.close()
        assert reply.status_line == "HTTP/1.1 200 OK"
        assert reply.headers["X-Outer"] == "yes"
        assert reply.headers["X-Aiobootstrap-Boot"] == registry.store.incarnation


# -- the cache and the early writes, without a socket ---------------------


def _record(version: int, rank: int = 0) -> Record:
    return Record(Key("default", "transfer_engine_info", "target", rank), {}, version, 0.0)


def _mocked_get(replies: GetReplies) -> tuple[web.Request, mock.Mock]:
    transport = mock.Mock()
    transport.is_closing.return_value = False
    request = make_mocked_request("GET", GET, transport=transport, writer=mock.Mock(output_size=0))
    return request, transport


def test_a_records_reply_is_encoded_once_per_version_and_forgotten_with_its_key() -> None:
    """Every get of one version shares one bytes object; a new version is encoded anew; a deletion drops it."""
    encoded: list[int] = []

    def encode(record: Record) -> bytes:
        encoded.append(record.version)
        return f"v{record.version}".encode()

    replies = GetReplies(encode, lambda: "boot")
    first = replies.body(_record(1))
    assert replies.body(_record(1)) is first
    assert replies.body(_record(2)) == b"v2"
    assert encoded == [1, 2]
    replies.delivered(_record(2).key, None)
    assert replies._bodies == {}


async def test_a_delivery_writes_the_gets_it_answers_one_loop_turn_later() -> None:
    """Due gets (after < version) are written after the delivering step; settle then returns the record sent."""
    replies = GetReplies(lambda record: b"{}", lambda: "boot")
    request, transport = _mocked_get(replies)
    old_request, old_transport = _mocked_get(replies)
    key = _record(5).key
    due = replies.expect(request, key, after=4)
    not_due = replies.expect(old_request, key, after=5)
    replies.delivered(key, _record(5))
    assert not transport.write.called  # the step that made the change goes first
    await asyncio.sleep(0)
    [(data,)] = [call.args for call in transport.write.call_args_list]
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    assert data.endswith(b"{}")
    assert not old_transport.write.called
    assert replies.settle(due) == _record(5)
    assert due.sent == len(data)
    assert replies.settle(not_due) is None
    assert replies._expecting == {}


@pytest.mark.parametrize("woken", [1, FEW_WOKEN, FEW_WOKEN + 1])
async def test_a_registrations_ok_is_written_with_the_gets_it_woke(woken: int) -> None:
    """As the registration's handler returns, its OK and the gets it woke are written at once (not a loop
    turn later, after the rest of the step), each once: a few gets just before the OK, more just after it."""
    replies = GetReplies(lambda record: b"{}", lambda: "boot")
    order: list[str] = []
    key = _record(5).key
    gets = []
    for _ in range(woken):
        request, transport = _mocked_get(replies)
        transport.write.side_effect = lambda data: order.append("woken")
        gets.append(replies.expect(request, key, after=4))
    replies.delivered(key, _record(5))
    assert order == []  # the step that made the change goes on first
    put_transport = mock.Mock()
    put_transport.is_closing.return_value = False
    writer = mock.Mock(output_size=0, drain=mock.AsyncMock())
    put = make_mocked_request("PUT", "/register_transfer_engine_info", transport=put_transport, writer=writer)
    put_transport.write.side_effect = lambda data: order.append("ok")
    reply = replies.ok_written(put)
    expected = ["woken"] * woken + ["ok"] if woken <= FEW_WOKEN else ["ok"] + ["woken"] * woken
    assert order == expected
    await reply.prepare(put)  # written already: aiohttp's prepare writes nothing more
    assert [replies.settle(get) for get in gets] == [_record(5)] * woken
    await asyncio.sleep(0)
    assert order == expected


async def test_a_get_settled_before_its_write_is_never_written() -> None:
    """A wait that returned on its own before the early write ran is answered by its handler alone."""
    replies = GetReplies(lambda record: b"{}", lambda: "boot")
    request, transport = _mocked_get(replies)
    early = replies.expect(request, _record(1).key, after=0)
    replies.delivered(early.key, _record(1))
    assert replies.settle(early) is None
    await asyncio.sleep(0)
    assert not transport.write.called


async def test_a_crowd_woken_together_shares_one_reply_per_variant() -> None:
    """A delivery makes each variant's bytes once for all the gets it answers, and writes that one object to each."""
    replies = GetReplies(lambda record: b"{}", lambda: "boot")
    made: list[int] = []
    parts = replies.parts

    def counted(record: Record, variant: int, whole: bool = False) -> tuple[bytes, bytes | None]:
        made.append(variant)
        return parts(record, variant, whole)

    replies.parts = counted  # type: ignore[method-assign]
    crowd = [_mocked_get(replies) for _ in range(5)]
    key = _record(1).key
    for request, _ in crowd:
        replies.expect(request, key, after=0)
    replies.delivered(key, _record(1))
    await asyncio.sleep(0)
    assert made == [0]
    [first] = crowd[0][1].write.call_args.args
    assert all(transport.write.call_args.args[0] is first for _, transport in crowd)
