"""Two loads that once stalled a server, each paired with a baseline of the same run (issue 41, item 11).

    python -m bench.parked_load [--watches 3000] [--registrations 400] [--readers 200] [--rounds 3]

Each round starts a fresh ``python -m aiobootstrap --port 0`` (memory store) per figure:

- ``watches``: registrations a second, one after another on one kept-alive connection (each a new rank),
  with ``--watches`` long-poll watches parked in the same namespace, each with a filter of its own
  (``/watch?after=0&wait=300&ranks=K``, ``K`` a rank nobody registers, so none is answered), against the
  same registrations with none parked. Issue F3 of the last round: 10/s against 774/s (0.01x).
- ``unread``: ``/health``'s worst latency (asked every 50 ms on a kept-alive connection opened first) while
  ``--readers`` clients each ask a batch of a different set over one 4 MiB record
  (``/get_transfer_engine_info_batch?ranks=0,K``) and never read a byte of it, against the same readers
  of a 64-byte record (as many requests at once: what the size adds). Issue F5: ``/health`` max 2,151 ms.

The figures are the medians over ``--rounds``, with each ratio taken in its own round (the loaded figure
over that round's baseline), printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass

from aiobootstrap.server.open_files import raise_open_file_limit

from ._servers import rss_kib, stop_gracefully

BANNER = "aiobootstrap listening on "
BIG = 4 << 20
PROBE_EVERY = 0.05


@dataclass
class Server:
    process: asyncio.subprocess.Process
    host: str
    port: int


async def _start() -> Server:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiobootstrap", "--port", "0", "--encoder-health-interval", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    async with asyncio.timeout(20):
        while not (line := (await process.stdout.readline()).decode()).startswith(BANNER):
            if not line:
                raise RuntimeError("the server exited before listening")
    host, _, port = line[len(BANNER) :].strip().removeprefix("http://").rpartition(":")
    return Server(process, host, int(port))


def _put(rank: int, weights: dict[str, str] | None = None) -> bytes:
    body = json.dumps(
        {"rank": rank, "transfer_engine_info": {"session_id": f"s{rank}", "weights_info_dict": weights or {}}}
    ).encode()
    head = (
        "PUT /register_transfer_engine_info HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _reply(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
    await reader.readexactly(length)
    return int(head.split(b" ", 2)[1])


async def _registrations_per_second(server: Server, first: int, count: int) -> float:
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        started = time.perf_counter()
        for rank in range(first, first + count):
            writer.write(_put(rank))
            assert await _reply(reader) == 200
        return count / (time.perf_counter() - started)
    finally:
        writer.close()


async def _park(server: Server, target: str) -> asyncio.StreamWriter:
    _, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    return writer


async def _parked(server: Server) -> int:
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        text = (await reader.read()).decode()
    finally:
        writer.close()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("aiobootstrap_watchers ")
    )


async def watches(count: int, registrations: int) -> tuple[float, float]:
    """Registrations a second with none parked, then with ``count`` watches parked (a fresh server each)."""
    server = await _start()
    try:
        await _registrations_per_second(server, 0, 50)  # warm
        baseline = await _registrations_per_second(server, 50, registrations)
    finally:
        await stop_gracefully(server.process)
    server = await _start()
    try:
        await _registrations_per_second(server, 0, 50)
        writers = [await _park(server, f"/watch?after=0&wait=300&ranks={100_000 + k}") for k in range(count)]
        async with asyncio.timeout(60):
            while await _parked(server) < count:  # noqa: ASYNC110 - the server says so only when asked
                await asyncio.sleep(0.1)
        loaded = await _registrations_per_second(server, 50, registrations)
        for writer in writers:
            writer.close()
    finally:
        await stop_gracefully(server.process)
    return baseline, loaded


async def _probe(server: Server, stop: asyncio.Event) -> list[float]:
    reader, writer = await asyncio.open_connection(server.host, server.port)
    latencies = []
    try:
        while not stop.is_set():
            started = time.perf_counter()
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            await _reply(reader)
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(PROBE_EVERY)
    finally:
        writer.close()
    return latencies


async def _unread_once(readers: int, seconds: float, size: int) -> tuple[float, float]:
    """``/health``'s max latency (ms) while ``readers`` clients each ask a batch of a different set over one
    record of ``size`` bytes and read nothing; and the server's RSS growth (MiB) meanwhile."""
    server = await _start()
    try:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(_put(0, {"blob": "x" * size}))
        assert await _reply(reader) == 200
        for rank in range(1, readers + 1):
            writer.write(_put(rank))
            assert await _reply(reader) == 200
        writer.close()
        before = rss_kib(server.process.pid)["VmRSS"]
        stop = asyncio.Event()
        probe = asyncio.create_task(_probe(server, stop))
        await asyncio.sleep(PROBE_EVERY * 4)  # the probe's connection is up before the readers come
        writers = [
            await _park(server, f"/get_transfer_engine_info_batch?ranks=0,{rank}")
            for rank in range(1, readers + 1)
        ]
        await asyncio.sleep(seconds)
        stop.set()
        worst = max(await probe) * 1000
        grown = (rss_kib(server.process.pid)["VmRSS"] - before) / 1024
        for writer in writers:
            writer.close()
    finally:
        await stop_gracefully(server.process)
    return worst, grown


async def unread(readers: int, seconds: float) -> tuple[float, float, float]:
    """``/health``'s max (ms) with ``readers`` unread batch replies of a 64-byte record (the baseline: as many
    requests at once), then of a 4 MiB record; and the RSS growth (MiB) with the big one."""
    baseline, _ = await _unread_once(readers, seconds, 64)
    loaded, grown = await _unread_once(readers, seconds, BIG)
    return baseline, loaded, grown


async def run(args: argparse.Namespace) -> None:
    raise_open_file_limit()
    rows: dict[str, list[tuple[float, ...]]] = {"watches": [], "unread": []}
    for _ in range(args.rounds):
        rows["watches"].append(await watches(args.watches, args.registrations))
        rows["unread"].append(await unread(args.readers, args.seconds))
    base, loaded = zip(*rows["watches"], strict=True)
    ratio = statistics.median(b / a for a, b in rows["watches"])
    print("| figure | baseline | loaded | loaded / baseline |")
    print("|---|---|---|---|")
    print(
        f"| registrations/s, {args.watches:,} watches parked with distinct filters | "
        f"{statistics.median(base):,.0f} | {statistics.median(loaded):,.0f} | {ratio:.2f}x |"
    )
    base, loaded, grown = zip(*rows["unread"], strict=True)
    ratio = statistics.median(b / a for a, b, _ in rows["unread"])
    print(
        f"| /health max ms, {args.readers} unread batch replies of a 4 MiB record | "
        f"{statistics.median(base):.1f} | {statistics.median(loaded):.1f} | {ratio:.1f}x "
        f"(RSS +{statistics.median(grown):.0f} MiB) |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.parked_load", description=__doc__.split("\n")[0])
    parser.add_argument("--watches", type=int, default=3000)
    parser.add_argument("--registrations", type=int, default=400)
    parser.add_argument("--readers", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=3.0, help="each /health probe's duration")
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(run(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
