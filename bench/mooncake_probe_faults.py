"""The Mooncake probes under faults (issue 41, items 3, 7 and 8), each beside a baseline of the same run.

aiobootstrap in its own process (``--mooncake-probe-interval``/``--mooncake-probe-timeout``), and, in this
process, peers on loopback that the server probes: an engine that answers as Mooncake's do, peers that
stream bytes after their reply, a port that accepts and never answers. Printed, one JSON line a scenario:

- ``big``: a live engine, then a 40 MiB ``rpc_meta`` of port 0 stored beside it (named to sort after
  it, so a round that parses every value does so while the live engine's probe is in flight): whether
  the live engine keeps its keys, ``/health``'s latency (max, median) and ``GET /mooncake``'s (read every
  0.5 s, as the page does), before and after.
- ``stream``: four ``rpc_meta`` at peers that stream after a valid reply: the server's RSS and
  ``/health``'s latency, beside the same run with four answering engines.
- ``hang``: ``--entries`` (10,000) ``rpc_meta`` at a port that accepts and never answers, in one
  namespace, and one dead engine (at the same port) in another: seconds until the dead engine's key is
  gone, beside the same engine alone; and with ``--mooncake-probe-networks 10.0.0.0/8``, the connections
  made to the port in two rounds.

``python -m bench.mooncake_probe_faults [--only big,stream,hang] [--timeout S] [--entries N] [--give-up S]``
(issue 41's figures: ``--only big --timeout 0.3``, then ``--only stream,hang``)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from aiobootstrap.server.open_files import raise_open_file_limit

from ._servers import SERVERS, RunningServer

_REPLY = b'{"status":"success"}\n'
_FRAME = struct.pack("<Q", len(_REPLY) + 1) + bytes([3]) + _REPLY
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Peers:
    """A listener on 127.0.0.1 whose connections ``handler`` serves; counts them."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=4096)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            if self.behaviour == "hang":
                await reader.read()
                return
            await reader.readexactly(12)
            writer.write(_FRAME)
            if self.behaviour == "stream":
                chunk = b"x" * (1 << 20)
                while True:
                    writer.write(chunk)
                    await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def _rpc(port: int, **extra: Any) -> bytes:
    return json.dumps({"ip_or_host_name": "127.0.0.1", "rpc_port": port, **extra}).encode()


async def _put(http: aiohttp.ClientSession, url: str, key: str, body: bytes, namespace: str = "") -> None:
    prefix = f"/ns/{namespace}" if namespace else ""
    async with http.put(f"{url}{prefix}/metadata", params={"key": key}, data=body) as reply:
        assert reply.status == 200, await reply.text()


async def _exists(http: aiohttp.ClientSession, url: str, key: str, namespace: str = "") -> bool:
    prefix = f"/ns/{namespace}" if namespace else ""
    async with http.get(f"{url}{prefix}/metadata", params={"key": key, "wait": "0"}) as reply:
        return reply.status == 200


async def _latencies(http: aiohttp.ClientSession, url: str, seconds: float) -> dict[str, float]:
    """``/health`` every 50 ms and ``GET /mooncake`` every 0.5 s for ``seconds``: max and median, ms."""
    health: list[float] = []
    listing: list[float] = []
    stop = time.monotonic() + seconds
    next_listing = 0.0
    while time.monotonic() < stop:
        for path, into in (("/health", health), ("/mooncake", listing)):
            if path == "/mooncake" and time.monotonic() < next_listing:
                continue
            started = time.perf_counter()
            async with http.get(url + path) as reply:
                await reply.read()
            into.append((time.perf_counter() - started) * 1000)
            if path == "/mooncake":
                next_listing = time.monotonic() + 0.5
        await asyncio.sleep(0.05)
    return {
        "health max ms": round(max(health), 1),
        "health median ms": round(statistics.median(health), 1),
        "mooncake max ms": round(max(listing), 1),
        "mooncake median ms": round(statistics.median(listing), 1),
    }


async def big(interval: float, timeout: float) -> dict[str, Any]:
    server = await RunningServer.start(
        SERVERS["aiobootstrap"],
        "--mooncake-probe-interval", str(interval), "--mooncake-probe-timeout", str(timeout),
    )  # fmt: skip
    engine = Peers("answer")
    port = await engine.start()
    try:
        async with aiohttp.ClientSession() as http:
            await _put(http, server.url, "mooncake/rpc_meta/live:1", _rpc(port))
            await _put(http, server.url, "mooncake/ram/live:1", b'{"buffers":[],"protocol":"tcp"}')
            baseline = await _latencies(http, server.url, 4 * interval)
            await _put(http, server.url, "mooncake/rpc_meta/zz-big:1", _rpc(0, pad="x" * (40 << 20)))
            probed = engine.connections
            after = await _latencies(http, server.url, 8 * interval)
            kept = await _exists(http, server.url, "mooncake/rpc_meta/live:1")
        return {
            "scenario": "big: a 40 MiB rpc_meta of port 0 beside a live engine",
            "baseline (live engine alone)": baseline,
            "with the 40 MiB value": after,
            "probes answered after the big value": engine.connections - probed,
            "live engine kept": kept,
        }
    finally:
        engine.close()
        await server.stop()


async def stream(interval: float, timeout: float) -> dict[str, Any]:
    results: dict[str, Any] = {"scenario": "stream: four rpc_meta at peers that stream after a valid reply"}
    for behaviour in ("answer", "stream"):
        server = await RunningServer.start(
            SERVERS["aiobootstrap"],
            "--mooncake-probe-interval", str(interval), "--mooncake-probe-timeout", str(timeout),
        )  # fmt: skip
        peers = [Peers(behaviour) for _ in range(4)]
        try:
            async with aiohttp.ClientSession() as http:
                for n, peer in enumerate(peers):
                    await _put(
                        http, server.url, f"mooncake/rpc_meta/{behaviour}:{n}", _rpc(await peer.start())
                    )
                rss = server.rss()
                latencies = await _latencies(http, server.url, 3 * interval)
            results[behaviour] = {
                "rss MiB at start": round(rss / 1024, 1),
                "peak rss MiB": round(server.peak_rss() / 1024, 1),
                "probes": sum(peer.connections for peer in peers),
                **{key: value for key, value in latencies.items() if key.startswith("health")},
            }
        finally:
            for peer in peers:
                peer.close()
            await server.stop()
    return results


async def _until_gone(http: aiohttp.ClientSession, url: str, give_up: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < give_up:
        if not await _exists(http, url, "mooncake/rpc_meta/dead:1", "team"):
            return round(time.monotonic() - started, 1)
        await asyncio.sleep(0.2)
    return None


async def hang(interval: float, timeout: float, entries: int, give_up: float) -> dict[str, Any]:
    results: dict[str, Any] = {"scenario": f"hang: {entries} rpc_meta at a port that never answers"}
    for junk in (0, entries):
        server = await RunningServer.start(
            SERVERS["aiobootstrap"],
            "--mooncake-probe-interval", str(interval), "--mooncake-probe-timeout", str(timeout),
        )  # fmt: skip
        peer = Peers("hang")
        port = await peer.start()
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
                await asyncio.gather(*(
                    _put(http, server.url, f"mooncake/rpc_meta/junk:{n}", _rpc(port), "junk") for n in range(junk)
                ))  # fmt: skip
                await _put(http, server.url, "mooncake/rpc_meta/dead:1", _rpc(port), "team")
                gone = await _until_gone(http, server.url, give_up)
            label = "dead engine alone" if not junk else f"beside {junk} entries"
            results[label] = {"gone after s": gone if gone is not None else f"> {give_up:g}"}
        finally:
            peer.close()
            await server.stop()
    label = "connections in two rounds, --mooncake-probe-networks 10.0.0.0/8"
    try:
        server = await RunningServer.start(
            SERVERS["aiobootstrap"],
            "--mooncake-probe-interval", str(interval), "--mooncake-probe-timeout", str(timeout),
            "--mooncake-probe-networks", "10.0.0.0/8",
        )  # fmt: skip
    except RuntimeError:
        results[label] = "no such option"
        return results
    peer = Peers("hang")
    port = await peer.start()
    try:
        async with aiohttp.ClientSession() as http:
            for n in range(64):
                await _put(http, server.url, f"mooncake/rpc_meta/junk:{n}", _rpc(port))
            await asyncio.sleep(2 * (interval + timeout))
        results[label] = peer.connections
    finally:
        peer.close()
        await server.stop()
    return results


async def main(args: argparse.Namespace) -> None:
    only = args.only.split(",")
    if "big" in only:
        print(json.dumps(await big(args.interval, args.timeout)), flush=True)
    if "stream" in only:
        print(json.dumps(await stream(args.interval, args.timeout)), flush=True)
    if "hang" in only:
        print(json.dumps(await hang(args.interval, args.timeout, args.entries, args.give_up)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default="big,stream,hang", help="scenarios, commas between")
    parser.add_argument("--interval", type=float, default=2.0, help="--mooncake-probe-interval (default: 2)")
    parser.add_argument("--timeout", type=float, default=2.0, help="--mooncake-probe-timeout (default: 2)")
    parser.add_argument("--entries", type=int, default=10000, help="entries at the port that never answers")
    parser.add_argument("--give-up", type=float, default=120.0, help="seconds to wait for the dead engine")
    raise_open_file_limit()
    asyncio.run(main(parser.parse_args()))
