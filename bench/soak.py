"""Soak figures: what a bad day and an abusive client cost the server (issue: bounded under abuse).

Run from the repository root (``make soak``; the Soak section of docs/benchmarks.md came from it)::

    .venv/bin/python -m bench.soak                       # everything, a few minutes
    .venv/bin/python -m bench.soak --only shutdown health # some sections
    .venv/bin/python -m bench.soak --quick                # smaller numbers, about a minute

Sections:

``crash``     SIGKILL the server mid-storm with ``--state-file``, restart it on the
              same journal, count the acknowledged registrations it lost (must be 0).
``shutdown``  park N long-polls (10,000 and 19,000), SIGTERM, time until the process
              has exited, and count the parked requests answered 503 (SPEC: all of
              them, within about two seconds). ``--trials N`` takes medians;
              ``--before PYTHON`` (another tree's ``.venv/bin/python``) alternates
              its trials with this tree's, side by side in one table.
``memory``    park big batch queries (``ranks=0-65535&wait=...``) and read the server's
              RSS: memory per parked batch query.
``health``    ``/health`` latency (p50, p99, max) idle, beside a client looping on
              ``ranks=0-65535`` batch queries (each answered 404 at once, naming every
              rank), and beside a slowloris (connections sending their headers one byte
              at a time).
``client``    a client's time past its timeout against bad servers (``bench.client_faults``).
``badlines``  the log bytes each malformed request line costs (``bench.client_faults``).

Every server is a real ``python -m aiobootstrap`` subprocess on 127.0.0.1 and port 0
(memory store unless said); the load comes from this process, which raises its own
open file limit to the hard limit as the server does. The machine is shared and
small: read medians and ratios, not absolutes. Linux only (RSS from /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from aiobootstrap.server.open_files import open_file_limit, raise_open_file_limit
from aiobootstrap.wire.routes import BATCH_PATH, GET_PATH, HEALTH_PATH, RANKS_PATH

from . import client_faults
from .durability import crash_test, pct, running, start_server, table

GET = GET_PATH
BATCH = BATCH_PATH
BIG_RANKS = "0-65535"
"""The big range of the memory and health sections: what one batch may name once the cap is 65,536."""
_PARK_TIMEOUT = 120.0


def host_port(url: str) -> tuple[str, int]:
    host, _, port = url.removeprefix("http://").rpartition(":")
    return host, int(port)


async def parked(url: str) -> int:
    """How many waits the server has parked (the listing's ``waiters``)."""
    async with aiohttp.ClientSession() as http, http.get(url + RANKS_PATH) as reply:
        return int((await reply.json())["waiters"])


async def until_parked(url: str, count: int) -> float:
    """Poll the listing until ``count`` waits are parked; the seconds it took."""
    start = time.perf_counter()
    async with asyncio.timeout(_PARK_TIMEOUT):
        # The server is another process: its listing is the only way to know.
        while await parked(url) < count:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    return time.perf_counter() - start


@dataclass
class Parker:
    """Raw connections, each with one long-poll request sent and not yet answered."""

    streams: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]

    @classmethod
    async def open(cls, url: str, targets: Sequence[str], concurrency: int = 256) -> Parker:
        host, port = host_port(url)
        streams: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        gate = asyncio.Semaphore(concurrency)

        async def one(target: str) -> None:
            async with gate:
                reader, writer = await asyncio.open_connection(host, port)
                writer.write(f"GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
                await writer.drain()
                streams.append((reader, writer))

        await asyncio.gather(*(one(target) for target in targets))
        return cls(streams)

    async def statuses(self, timeout: float = 30.0) -> list[tuple[int | None, float]]:
        """The status of each reply (``None``: none arrived within ``timeout``) and when its line came."""

        async def one(reader: asyncio.StreamReader) -> tuple[int | None, float]:
            try:
                async with asyncio.timeout(timeout):
                    line = await reader.readline()
            except TimeoutError:
                return None, time.perf_counter()
            parts = line.split()
            return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None, time.perf_counter()

        return await asyncio.gather(*(one(reader) for reader, _ in self.streams))

    def close(self) -> None:
        for _, writer in self.streams:
            writer.close()


# -- shutdown: parked waits, then SIGTERM ---------------------------------


@dataclass
class Stop:
    """One SIGTERM trial's figures."""

    connecting: float
    parking: float
    rss_kib: int
    answered: int
    last_answer: float | None
    exit_s: float
    status: int | None
    unanswered: int


async def shutdown_time(waiters: int, python: str = sys.executable) -> Stop:
    # --max-waiters: the default leaves 1,024 descriptors in reserve, below 19,000 under a 20,000 limit.
    server = await start_server("--max-wait", "600", "--max-waiters", str(waiters + 64), python=python)
    targets = [f"{GET}?rank={10**6 + index}&wait=600" for index in range(waiters)]
    start = time.perf_counter()
    parker = await Parker.open(server.url, targets)
    parking = await until_parked(server.url, waiters)
    connecting = time.perf_counter() - start
    rss = server.rss_kib()
    replies = asyncio.create_task(parker.statuses())
    await asyncio.sleep(0.2)  # every reader waiting for its line
    start = time.perf_counter()
    server.proc.send_signal(signal.SIGTERM)
    status = await server.proc.wait()
    exit_s = time.perf_counter() - start
    statuses = await replies
    parker.close()
    answered = [when - start for code, when in statuses if code == 503]
    return Stop(
        connecting,
        parking,
        rss,
        len(answered),
        max(answered) if answered else None,
        exit_s,
        status,
        sum(1 for code, _ in statuses if code is None),
    )


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def shutdown_row(tree: str, waiters: int, stops: Sequence[Stop]) -> list[object]:
    """One table row: medians of the trials' times, the worst of their counts."""
    lasts = [stop.last_answer for stop in stops if stop.last_answer is not None]
    answered = min(stop.answered for stop in stops)
    return [
        *([tree] if tree else []),
        f"{waiters:,}",
        f"{_median([stop.connecting for stop in stops]):.1f} "
        f"({_median([stop.parking for stop in stops]):.1f} waiting for the last)",
        f"{_median([stop.rss_kib for stop in stops]) / 1024:.0f}",
        f"{answered:,}" + (f" (last after {_median(lasts):.2f} s)" if lasts else ""),
        f"{_median([stop.exit_s for stop in stops]):.2f}"
        + (f" (max {max(stop.exit_s for stop in stops):.2f})" if len(stops) > 1 else ""),
        ", ".join(sorted({str(stop.status) for stop in stops})),
        f"{max(stop.unanswered for stop in stops):,}",
    ]


async def shutdown_rows(waiters: Sequence[int], trials: int, before: str | None) -> list[list[object]]:
    """Each size's row (one per tree with ``before``, their trials alternating)."""
    trees = {"": sys.executable} if before is None else {"before": before, "after": sys.executable}
    rows: list[list[object]] = []
    for count in waiters:
        stops: dict[str, list[Stop]] = {tree: [] for tree in trees}
        for _ in range(trials):
            for tree, python in trees.items():
                stops[tree].append(await shutdown_time(count, python))
        rows.extend(shutdown_row(tree, count, runs) for tree, runs in stops.items())
    return rows


# -- memory: parked big batch queries -------------------------------------


async def batch_memory(queries: int) -> list[list[object]]:
    async with running("--max-wait", "600") as server, aiohttp.ClientSession() as http:
        # Warm up: the code paths, and one big 404 (its buffers are what a first query costs anyway).
        for query in (f"?ranks={BIG_RANKS}", "?ranks=0"):
            async with http.get(server.url + BATCH + query) as reply:
                await reply.read()
        before = server.rss_kib()
        start = time.perf_counter()
        parker = await Parker.open(server.url, [f"{BATCH}?ranks={BIG_RANKS}&wait=600"] * queries)
        await until_parked(server.url, queries)
        parking = time.perf_counter() - start
        after = server.rss_kib()
        health = await health_latencies(server.url, 2.0)
        parker.close()
        # The server notices the hang-ups and drops the waits.
        await until_gone(server.url)
        released = server.rss_kib()
    per_query = (after - before) / queries
    return [
        ["parked batch queries", f"{queries}"],
        ["time to park them all (s)", f"{parking:.2f}"],
        ["server RSS before (MiB)", f"{before / 1024:.1f}"],
        ["server RSS parked (MiB)", f"{after / 1024:.1f}"],
        ["per parked query (MiB)", f"{per_query / 1024:.2f}"],
        ["server RSS after they hung up (MiB)", f"{released / 1024:.1f}"],
        ["/health p50 / p99 while parked (ms)", f"{health[0]:.1f} / {health[1]:.1f}"],
    ]


async def until_gone(url: str) -> None:
    async with asyncio.timeout(_PARK_TIMEOUT):
        while await parked(url):  # noqa: ASYNC110 - as in until_parked
            await asyncio.sleep(0.1)


# -- health: latency beside abuse -----------------------------------------


async def health_latencies(url: str, seconds: float, interval: float = 0.01) -> tuple[float, float, float]:
    """``/health`` every ``interval`` for ``seconds`` on one kept-alive connection: p50, p99, max in ms."""
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as http:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            async with http.get(url + HEALTH_PATH) as reply:
                await reply.read()
                assert reply.status == 200, reply.status
            times.append(time.perf_counter() - start)
            await asyncio.sleep(interval)
    return pct(times, 0.5) * 1e3, pct(times, 0.99) * 1e3, max(times) * 1e3


async def batch_loop(url: str, stop: asyncio.Event, counts: list[int]) -> None:
    """Ask ``ranks=0-65535`` (no wait) again and again: each answer is a 404 naming every rank."""
    async with aiohttp.ClientSession() as http:
        while not stop.is_set():
            async with http.get(f"{url}{BATCH}?ranks={BIG_RANKS}") as reply:
                body = await reply.read()
            counts.append(len(body))


async def slowloris(url: str, connections: int, stop: asyncio.Event, byte_every: float) -> int:
    """``connections`` sockets that send a request head one byte at a time and never finish it.

    Returns how many the server closed while the attack ran.
    """
    host, port = host_port(url)
    closed = 0

    async def one(index: int) -> None:
        nonlocal closed
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            closed += 1
            return
        head = f"GET /health HTTP/1.1\r\nHost: {host}\r\nX-Slow-{index}: ".encode() + b"a" * 10_000
        try:
            for byte in head:
                if stop.is_set():
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(byte_every)
            if reader.at_eof():
                closed += 1
        except (ConnectionError, OSError):
            closed += 1
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    await asyncio.gather(*(one(index) for index in range(connections)))
    return closed


async def health_beside_abuse(seconds: float, loopers: int, connections: int) -> list[list[object]]:
    rows: list[list[object]] = []
    async with running() as server:
        idle = await health_latencies(server.url, seconds)
        rows.append(["idle", *(f"{ms:.1f}" for ms in idle), ""])

        stop = asyncio.Event()
        sizes: list[int] = []
        loops = [asyncio.create_task(batch_loop(server.url, stop, sizes)) for _ in range(loopers)]
        await asyncio.sleep(0.5)
        start = time.perf_counter()
        beside = await health_latencies(server.url, seconds)
        elapsed = time.perf_counter() - start
        stop.set()
        await asyncio.gather(*loops)
        size = sizes[-1] if sizes else 0
        rows.append(
            [
                f"{loopers} client(s) looping on ranks={BIG_RANKS}",
                *(f"{ms:.1f}" for ms in beside),
                f"{len(sizes) / elapsed:.1f} batch 404s/s of {size / 1e6:.2f} MB",
            ]
        )

        stop = asyncio.Event()
        attack = asyncio.create_task(slowloris(server.url, connections, stop, byte_every=0.5))
        await asyncio.sleep(2.0)  # every connection open and trickling
        fds = server.open_fds()
        beside = await health_latencies(server.url, seconds)
        stop.set()
        closed = await attack
        rows.append(
            [
                f"slowloris: {connections:,} connections, one header byte each every 0.5 s",
                *(f"{ms:.1f}" for ms in beside),
                f"server fds {fds:,}; {closed} closed by the server",
            ]
        )
    return rows


# -- main -----------------------------------------------------------------

SECTIONS = ("crash", "shutdown", "memory", "health", "client", "badlines")


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--quick", action="store_true", help="smaller numbers: about a minute")
    parser.add_argument("--crash-rounds", type=int, default=None)
    parser.add_argument("--waiters", type=int, nargs="+", default=None, help="parked waits before SIGTERM")
    parser.add_argument("--trials", type=int, default=1, help="SIGTERM trials per size (medians)")
    parser.add_argument(
        "--before",
        metavar="PYTHON",
        help="another tree's interpreter (its .venv/bin/python): SIGTERM trials alternate between the two",
    )
    parser.add_argument("--batch-queries", type=int, default=None, help="parked big batch queries")
    parser.add_argument("--seconds", type=float, default=None, help="each /health measurement")
    parser.add_argument("--slowloris", type=int, default=None, help="slowloris connections")
    parser.add_argument(
        "--before-path",
        metavar="DIR",
        help="an older tree's sources (with aiobootstrap/): the client and badlines sections run it too",
    )
    args = parser.parse_args(argv)
    before_path = client_faults.sources(args.before_path)
    quick = args.quick
    crash_rounds = args.crash_rounds or (2 if quick else 5)
    waiters = args.waiters or ([2_000] if quick else [10_000, 19_000])
    batch_queries = args.batch_queries or (5 if quick else 20)
    seconds = args.seconds or (3.0 if quick else 10.0)
    connections = args.slowloris or (200 if quick else 2_000)

    raise_open_file_limit()
    limit = open_file_limit() or 1 << 20
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, open file limit {limit:,}")
    began = time.perf_counter()
    if "crash" in args.only:
        with tempfile.TemporaryDirectory(prefix="aiobootstrap-soak-") as name:
            table(
                "Crash: SIGKILL mid-storm (16 clients) with --state-file, restart, compare",
                ["round", "acknowledged", "lost", "unacknowledged but kept", "ranks on restart",
                 "restart ms", "errors"],
                await crash_test(Path(name), crash_rounds, 16),
            )  # fmt: skip
    if "shutdown" in args.only:
        if max(waiters) + 64 > limit - 64:
            print(f"\n(the open file limit {limit:,} is too low for {max(waiters):,} parked waits)")
        table(
            "Shutdown: parked long-polls, then SIGTERM"
            + (f" (medians of {args.trials})" if args.trials > 1 else ""),
            [*(["tree"] if args.before else []), "parked", "connect + park (s)", "server RSS (MiB)",
             "answered 503", "SIGTERM to exit (s)", "exit status", "not answered"],
            await shutdown_rows(waiters, args.trials, args.before),
        )  # fmt: skip
    if "memory" in args.only:
        table(
            f"Memory: parked batch queries ranks={BIG_RANKS}&wait=600",
            ["", ""],
            await batch_memory(batch_queries),
        )
    if "health" in args.only:
        table(
            f"/health latency beside abuse ({seconds:g} s each, one probe every 10 ms)",
            ["beside", "p50 ms", "p99 ms", "max ms", "the abuse"],
            await health_beside_abuse(seconds, 1, connections),
        )
    if "client" in args.only:
        table(
            "The client against a bad server: time past its timeout (killed 20 s past it)",
            ["server", "call", *(["before", "after"] if before_path else ["past its timeout"])],
            await client_faults.client_rows(3.0, 23.0, before_path),
        )
    if "badlines" in args.only:
        table(
            "Malformed request lines (GET /health? and 8,100 \\x01): log written, default log level",
            [*(["tree"] if before_path else []), "lines", "lines/s", "log bytes per line"],
            await client_faults.bad_line_rows(500 if quick else 5_000, before_path),
        )
    print(f"\n{time.perf_counter() - began:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
