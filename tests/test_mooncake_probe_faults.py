"""The Mooncake probes bounded, and the loop never blocked (issue 41, items 3, 7 and 8), against real
sockets: an engine that answers, one that holds the loop before it answers, one that streams bytes after its
reply, one that accepts and never answers; and a big value, whose parses are counted."""

from __future__ import annotations

import asyncio
import io
import json
import struct
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aiobootstrap.cli.parser import server_config, server_parser
from aiobootstrap.server.appkeys import REGISTRY
from aiobootstrap.server.faces.mooncake import probes as probes_module
from aiobootstrap.server.faces.mooncake.probes import MooncakeProbes
from aiobootstrap.server.faces.mooncake.settings import MooncakeSettings, parse_networks
from aiobootstrap.server.faces.rounds import HeldUp, in_own_time
from aiobootstrap.store import Key

from .helpers.waits import GUARD

MEMORY = pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
STORES = pytest.mark.parametrize("store_kind", ["memory", "redis"], indirect=True)
_REPLY = b'{"status":"success"}\n'  # an engine's reply to the probe
_FRAME = struct.pack("<Q", len(_REPLY) + 1) + bytes([3]) + _REPLY
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]


@asynccontextmanager
async def listener(handler: Handler) -> AsyncIterator[int]:
    """A TCP listener on 127.0.0.1 running ``handler`` per connection; its port."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def answering(stall: float = 0.0) -> Handler:
    """An engine that reads the probe and answers it (after holding the whole loop ``stall`` seconds)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readexactly(12)
            if stall:
                time.sleep(stall)  # noqa: ASYNC251 (blocks the loop the prober runs on: its timeout fires late)
            writer.write(_FRAME)
            await writer.drain()
        finally:
            writer.close()

    return handle


def _rpc(port: int, host: str = "127.0.0.1", **extra: Any) -> str:
    return json.dumps({"ip_or_host_name": host, "rpc_port": port, **extra})


async def _put(client: Any, key: str, value: str | bytes, namespace: str = "") -> None:
    prefix = f"/ns/{namespace}" if namespace else ""
    body = value.encode() if isinstance(value, str) else value
    reply = await client.put(f"{prefix}/metadata?key={key}", data=io.BytesIO(body))
    assert reply.status == 200, await reply.text()


def _key(name: str, namespace: str = "default") -> Key:
    return Key.named(namespace, "metadata", "target", name)


class Parses:
    """``json.loads`` counted: the calls whose text is ``of`` (or at least ``above`` characters long)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts: list[str | bytes] = []
        loads = json.loads

        def counting(text: Any, *args: Any, **kwargs: Any) -> Any:
            self.texts.append(text if isinstance(text, str | bytes) else b"")
            return loads(text, *args, **kwargs)

        monkeypatch.setattr(json, "loads", counting)

    def of(self, text: str) -> int:
        return sum(1 for seen in self.texts if seen in (text, text.encode()))

    def above(self, size: int) -> int:
        return sum(1 for seen in self.texts if len(seen) >= size)


# -- item 3: a big value costs the rounds and the listing nothing; a stalled loop is no failure --------


@STORES
async def test_a_big_rpc_meta_is_never_parsed_and_a_small_one_once_per_version(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2 MiB ``rpc_meta`` (port 0: never probed) is read by no round and no ``GET /mooncake``; a live
    engine's entry (and a small one of port 0) is read once across three rounds, and again only when it is
    written again."""
    async with listener(answering()) as port:
        live = _rpc(port)
        big = _rpc(0, pad="x" * (2 << 20))
        idle = _rpc(0, host="10.0.0.9")  # small, and never probed either
        await _put(client, "mooncake/rpc_meta/idle:1", idle)
        await _put(client, "mooncake/rpc_meta/live:1", live)
        await _put(client, "mooncake/rpc_meta/big:1", big)
        parses = Parses(monkeypatch)
        probes = MooncakeProbes(client.app[REGISTRY], timeout=5)
        for _ in range(3):
            await probes.round()
        assert (parses.of(live), parses.of(idle)) == (1, 1)
        assert probes.failures(_key("mooncake/rpc_meta/live:1")) == 0
        for _ in range(2):
            listing = await client.get("/mooncake")
            assert listing.status == 200
        assert parses.above(1 << 20) == 0
        await client.delete("/metadata?key=mooncake/rpc_meta/live:1")
        await _put(client, "mooncake/rpc_meta/live:1", live)  # a new version: read again, once
        for _ in range(2):
            await probes.round()
        assert parses.of(live) == 1 + 2 + 1  # the rounds' two reads, and one by each GET /mooncake
        assert parses.above(1 << 20) == 0


@STORES
async def test_a_namespace_is_read_again_only_when_its_version_moved(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rounds read a namespace's records (on Redis, every value over the network) once per version of
    the namespace, not once a round."""
    registry = client.app[REGISTRY]
    reads: list[str] = []
    records = registry.records

    def counting(namespace: str, kind: str, role: str) -> Any:
        reads.append(namespace)
        return records(namespace, kind, role)

    monkeypatch.setattr(registry, "records", counting)
    async with listener(answering()) as port:
        await _put(client, "mooncake/rpc_meta/live:1", _rpc(port))
        probes = MooncakeProbes(registry, timeout=5)
        for _ in range(3):
            await probes.round()
        assert reads == ["default"]
        await _put(client, "mooncake/ram/live:1", b"{}")
        for _ in range(2):
            await probes.round()
        assert reads == ["default", "default"]


@MEMORY
async def test_get_mooncake_reads_a_segment_once_per_version_and_a_huge_one_never(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment = json.dumps({"protocol": "tcp", "buffers": [{"addr": n, "length": 4096} for n in range(9000)]})
    huge = json.dumps({"protocol": "tcp", "buffers": [], "pad": "x" * (2 << 20)})
    await _put(client, "mooncake/ram/a:1", segment)
    await _put(client, "mooncake/ram/b:1", huge)
    parses = Parses(monkeypatch)
    for _ in range(3):
        reply = await client.get("/mooncake")
        assert reply.status == 200
        body = json.loads(await reply.read())
    assert [(engine["name"], engine["buffers"]) for engine in body["engines"]] == [
        ("a:1", 9000),
        ("b:1", None),
    ]
    assert parses.of(segment) == 1
    assert parses.above(2 << 20) == 0


@MEMORY
async def test_a_failure_while_the_loop_was_held_up_is_not_counted(client: Any) -> None:
    """An engine that answers every probe, but whose reply lands while the server's loop is held up past
    the probe's timeout (the 40 MiB parse of the issue), keeps its keys however many rounds pass."""
    async with listener(answering(stall=0.6)) as port:
        await _put(client, "mooncake/rpc_meta/live:1", _rpc(port))
        await _put(client, "mooncake/ram/live:1", b"{}")
        probes = MooncakeProbes(client.app[REGISTRY], timeout=0.2)
        for _ in range(3):
            await probes.round()
        assert probes.failures(_key("mooncake/rpc_meta/live:1")) == 0
        assert (await client.get("/metadata?key=mooncake/rpc_meta/live:1")).status == 200
        assert (await client.get("/metadata?key=mooncake/ram/live:1")).status == 200


async def test_work_the_loop_never_gives_its_time_is_held_up_not_timed_out() -> None:
    """A loop held up across every deadline (a hog blocking it 0.3 s a turn) gives a 0.1 s probe none of
    its time: ``HeldUp`` (not counted), where a plain timeout would have called the peer dead."""

    async def hog() -> None:
        while True:
            time.sleep(0.3)  # noqa: ASYNC251 (the hold-up itself)
            await asyncio.sleep(0)

    hogging = asyncio.create_task(hog())
    try:
        with pytest.raises(HeldUp):
            await in_own_time(asyncio.Event().wait(), 0.1)
    finally:
        hogging.cancel()
        await asyncio.wait({hogging})


# -- item 7: a probe reads a few bytes, however much a peer sends ----------------------------------


async def test_a_probe_reads_a_few_bytes_of_a_peer_that_streams() -> None:
    """A peer that sends a valid reply, then streams: the probe fails and closes at once; the peer could
    not hand it 64 MiB (before: read to the end of the stream, all of it, within the timeout)."""
    sent = 0
    done = asyncio.Event()

    async def streaming(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        try:
            await reader.readexactly(12)
            writer.write(_FRAME)
            chunk = b"x" * (1 << 20)
            while sent < 64 << 20:
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)
            await reader.read()  # until the prober closes
        except OSError:
            pass  # the prober closed: what a bounded read does
        finally:
            writer.close()
            done.set()

    async with listener(streaming) as port:
        assert await probes_module.probe("127.0.0.1", port, 3.0) is False
        await asyncio.wait_for(done.wait(), GUARD)
    assert sent < 64 << 20


async def test_a_probe_of_an_engine_that_answers_succeeds() -> None:
    async with listener(answering()) as port:
        assert await probes_module.probe("127.0.0.1", port, 5.0) is True


# -- item 8: a round is bounded, namespaces take turns, and the probes keep to the networks given ------


def hanging(accepted: list[int]) -> Handler:
    """A peer that accepts and never answers: each connection counted."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            await reader.read()
        finally:
            writer.close()

    return handle


@STORES
async def test_a_round_starts_no_probe_past_its_budget_and_namespaces_take_turns(client: Any) -> None:
    """40 entries at a port that accepts and never answers in one namespace, one dead engine in another:
    a round starts at most ``at_once`` probes a timeout's worth (before: all 41), and the other
    namespace's engine is probed every round, so it leaves after 3 (more only if the loop was held up)."""
    accepted: list[int] = []
    async with listener(hanging(accepted)) as port:
        for n in range(40):
            await _put(client, f"mooncake/rpc_meta/junk:{n}", _rpc(port), namespace="junk")
        await _put(client, "mooncake/rpc_meta/dead:1", _rpc(port), namespace="team")
        probes = MooncakeProbes(client.app[REGISTRY], timeout=0.5, round_seconds=0.5, at_once=4)
        dead = _key("mooncake/rpc_meta/dead:1", "team")
        rounds = 0
        while await client.app[REGISTRY].get(dead) is not None:
            assert rounds < 10
            before = len(accepted)
            await probes.round()
            rounds += 1
            assert len(accepted) - before <= 4
        assert rounds >= 3


@MEMORY
async def test_the_probes_keep_to_the_networks_given(client: Any) -> None:
    accepted: list[int] = []
    async with listener(hanging(accepted)) as port:
        await _put(client, "mooncake/rpc_meta/ip:1", _rpc(port))
        await _put(client, "mooncake/rpc_meta/name:1", _rpc(port, host="localhost"))
        registry = client.app[REGISTRY]
        elsewhere = MooncakeProbes(registry, timeout=0.3, networks=parse_networks("10.0.0.0/8"))
        for _ in range(3):
            await elsewhere.round()
        assert accepted == []  # neither connected to, and both kept
        assert await registry.get(_key("mooncake/rpc_meta/ip:1")) is not None
        assert await registry.get(_key("mooncake/rpc_meta/name:1")) is not None
        here = MooncakeProbes(registry, timeout=0.3, networks=parse_networks("127.0.0.0/8"))
        await here.round()
        assert len(accepted) == 2  # the IP, and the name resolved to one inside


def test_the_networks_option() -> None:
    def settings(*argv: str) -> MooncakeSettings:
        return server_config(server_parser().parse_args(list(argv)), {}).settings_of(MooncakeSettings)

    assert settings().mooncake_probe_networks == ()
    given = settings("--mooncake-probe-networks", "10.1.2.3/8, fd00::/8")
    assert given.mooncake_probe_networks == ("10.0.0.0/8", "fd00::/8")
    with pytest.raises(ValueError, match=r"'10\.0\.0\.0/33' is not a network"):
        MooncakeSettings(mooncake_probe_networks=("10.0.0.0/33",))
