"""Many slow readers of one big record: the server's memory and its ``/health`` while it writes to them.

    python -m bench.big_readers [--readers 100,200,500] [--before /tmp/before-bytes]

Per reader count, per scenario, starts a fresh ``python -m aiobootstrap --port 0``
(memory store) in its own process, registers one 4 MiB record (rank 0) and a
small record per reader, then opens that many raw loopback sockets (64 KiB
receive buffer) that each send one request and read 64 KiB every 20 ms:

- ``get``: every reader asks ``/get_transfer_engine_info?rank=0``, the one big
  reply (issue F6: does writing it block the loop?);
- ``batch``: reader k asks ``/get_transfer_engine_info_batch?ranks=0,k``, a
  different set each over the one big record (issue F5: is the big record's
  body copied per reader?).

While they read (``--seconds``), ``/health`` is asked every 50 ms on one
kept-alive connection opened before them: its p50 and max. The server's ``VmRSS`` (``/proc/PID/status``) is
read before, at its highest meanwhile and 2 s after every reader has closed
(the batch replies' cache is dropped a second after it is filled). With
``--before TREE`` (a checkout of an older commit: ``git worktree add
/tmp/before-bytes 0ef6a46``) the same runs against that tree's server too, and
the table shows both, with how many readers read their whole reply and the
bytes all of them read a second, taking turns (``--trials`` runs each): the medians, and
the range of ``/health``'s max.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from aiobootstrap.server.open_files import raise_open_file_limit

from ._servers import rss_kib, start_in_tree, stop_gracefully

ROOT = Path(__file__).resolve().parent.parent
BANNER = "aiobootstrap listening on "
BIG = 4 << 20
CHUNK = 64 * 1024
"""What a reader reads at a time, and its socket's receive buffer."""
PAUSE = 0.02
"""How long a reader sleeps between two reads."""
PROBE_EVERY = 0.05
SETTLE = 2.0
"""Seconds after the readers close before the last RSS: the batch cache goes a second after it is filled."""


@dataclass
class Row:
    tree: str
    scenario: str
    readers: int
    grown_mib: float
    health_p50_ms: float
    health_max_ms: float
    after_mib: float
    done: int
    delivered_mib_s: float


async def _exchange(host: str, port: int, request: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        data = await reader.read()
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def _put(host: str, port: int, rank: int, weights: dict[str, str]) -> None:
    body = json.dumps(
        {"rank": rank, "transfer_engine_info": {"session_id": f"s{rank}", "weights_info_dict": weights}}
    )
    data = body.encode()
    request = (
        f"PUT /register_transfer_engine_info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode() + data
    status, _ = await _exchange(host, port, request)
    assert status == 200, status


def _get(target: str) -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()


async def _slow_reader(host: str, port: int, target: str, stop: asyncio.Event) -> tuple[bool, int]:
    """Send one request, read its reply 64 KiB at a time with a pause between: whether it was read whole,
    and the bytes read."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CHUNK)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, (host, port))
        await loop.sock_sendall(sock, _get(target))
        got = 0
        while not stop.is_set():
            data = await loop.sock_recv(sock, CHUNK)
            if not data:
                return got > 0, got
            got += len(data)
            await asyncio.sleep(PAUSE)
        return False, got
    finally:
        sock.close()


async def _probe(host: str, port: int, stop: asyncio.Event) -> list[float]:
    """``/health`` every 50 ms over one kept-alive connection (opened before the readers: no accept queue)."""
    reader, writer = await asyncio.open_connection(host, port)
    request = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    latencies = []
    try:
        while not stop.is_set():
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(PROBE_EVERY)
    finally:
        writer.close()
    return latencies


async def _sample(pid: int, stop: asyncio.Event, rss: list[int]) -> None:
    while not stop.is_set():
        rss.append(rss_kib(pid)["VmRSS"])
        await asyncio.sleep(PROBE_EVERY)


async def one_run(label: str, tree: Path, scenario: str, readers: int, seconds: float) -> Row:
    argv = ["-m", "aiobootstrap", "--port", "0", "--log-level", "warning", "--max-wait", "300"]
    process, url = await start_in_tree(label, tree, argv, BANNER, log="big_readers")
    host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
    port_number = int(port)
    try:
        await _put(host, port_number, 0, {"w": "x" * BIG})
        for rank in range(1, readers + 1):
            await _put(host, port_number, rank, {})
        # Warm: the big body encoded once, every code path taken once.
        await _exchange(host, port_number, _get("/get_transfer_engine_info?rank=0"))
        await _exchange(host, port_number, _get("/get_transfer_engine_info_batch?ranks=0,1"))
        await asyncio.sleep(SETTLE)
        before = rss_kib(process.pid)["VmRSS"]
        stop = asyncio.Event()
        targets = [
            "/get_transfer_engine_info?rank=0"
            if scenario == "get"
            else f"/get_transfer_engine_info_batch?ranks=0,{k}"
            for k in range(1, readers + 1)
        ]
        samples: list[int] = []
        probe = asyncio.create_task(_probe(host, port_number, stop))
        sampler = asyncio.create_task(_sample(process.pid, stop, samples))
        await asyncio.sleep(PROBE_EVERY)
        reading = [asyncio.create_task(_slow_reader(host, port_number, target, stop)) for target in targets]
        await asyncio.sleep(seconds)
        stop.set()
        ends = await asyncio.gather(*reading)
        done = sum(whole for whole, _ in ends)
        delivered = sum(got for _, got in ends) / seconds / (1 << 20)
        latencies = await probe
        await sampler
        await asyncio.sleep(SETTLE)
        after = rss_kib(process.pid)["VmRSS"]
    finally:
        await stop_gracefully(process)
    return Row(
        label,
        scenario,
        readers,
        (max(samples, default=before) - before) / 1024,
        statistics.median(latencies) * 1000,
        max(latencies) * 1000,
        (after - before) / 1024,
        done,
        delivered,
    )


def _row_line(row: Row) -> str:
    return (
        f"| {row.tree} | {row.scenario} | {row.readers} | {row.grown_mib:+.0f} MiB | {row.health_p50_ms:.0f} ms"
        f" | {row.health_max_ms:.0f} ms | {row.after_mib:+.0f} MiB | {row.done} | {row.delivered_mib_s:.0f} MiB/s |"
    )


def _summary(rows: list[Row]) -> str:
    """Per scenario, count and tree: the medians over the trials, and the range of ``/health``'s max."""
    lines = [
        "| scenario | readers | tree | RSS growth while reading | /health p50 | /health max (range) "
        "| RSS after close | read whole | delivered |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, int, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.scenario, row.readers, row.tree), []).append(row)
    for (scenario, readers, tree), trials in groups.items():
        highest = [trial.health_max_ms for trial in trials]
        lines.append(
            f"| {scenario} | {readers} | {tree} | {statistics.median(t.grown_mib for t in trials):+.0f} MiB"
            f" | {statistics.median(t.health_p50_ms for t in trials):.0f} ms"
            f" | {statistics.median(highest):.0f} ms ({min(highest):.0f}-{max(highest):.0f})"
            f" | {statistics.median(t.after_mib for t in trials):+.0f} MiB"
            f" | {statistics.median(t.done for t in trials):.0f}"
            f" | {statistics.median(t.delivered_mib_s for t in trials):.0f} MiB/s |"
        )
    return "\n".join(lines)


async def run(
    trees: list[tuple[str, Path]], scenarios: list[str], counts: list[int], seconds: float, trials: int
) -> int:
    rows = []
    for scenario in scenarios:
        for readers in counts:
            for _ in range(trials):
                for label, tree in trees:  # the trees take turns: both see the same machine load
                    row = await one_run(label, tree, scenario, readers, seconds)
                    print(_row_line(row), flush=True)
                    rows.append(row)
    print(f"\nMedians of {trials} trials, {seconds:g} s of reading each:\n")
    print(_summary(rows))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.big_readers", description=__doc__.split("\n")[0])
    parser.add_argument("--readers", default="100,200,500", help="reader counts, comma-separated")
    parser.add_argument("--scenarios", default="batch,get", help="batch, get or both")
    parser.add_argument("--seconds", type=float, default=3.0, help="how long the readers read")
    parser.add_argument("--trials", type=int, default=3, help="runs per tree, scenario and count")
    parser.add_argument("--before", type=Path, help="a source tree (with aiobootstrap/) to compare against")
    args = parser.parse_args()
    counts = [int(count) for count in args.readers.split(",")]
    if max(counts) > 2000 or args.trials < 1:
        parser.error("at most 2000 readers, at least one trial")
    raise_open_file_limit()
    trees = [("after", ROOT)] if args.before is None else [("before", args.before.resolve()), ("after", ROOT)]
    work = run(trees, args.scenarios.split(","), counts, args.seconds, args.trials)
    try:
        import uvloop  # the load generator's own loop: lighter than asyncio's, when installed
    except ImportError:
        return asyncio.run(work)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(work)


if __name__ == "__main__":
    sys.exit(main())
