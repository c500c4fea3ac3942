"""Durability figures: what ``--state-file`` costs, a crash test, and a soak.

Run from the repository root (the numbers in docs/durability.md came from this)::

    .venv/bin/python -m bench.durability                    # everything, about four minutes
    .venv/bin/python -m bench.durability --only cost crash  # some sections

Sections:

``sync``   the raw price of making one change durable, measured on the same
           disk: append + fdatasync of a journal line vs a SQLite WAL commit
           (synchronous=FULL), one change per commit and 64 per commit.
``cost``   registrations through the real CLI server, in memory and with
           ``--state-file``, rounds interleaved: latency p50/p99 of one client
           registering one at a time, and registrations/s with many clients.
``crash``  SIGKILL the server in the middle of a registration storm from
           several clients (half of them in a namespace), restart it on the
           same file, and count the acknowledged (200) registrations it lost:
           must be 0.
``soak``   mixed register / get / wait / disconnect load on a durable server
           for a bounded time: server RSS and open fds at start and end,
           errors seen.

Every server is a real ``python -m aiobootstrap`` subprocess on 127.0.0.1 and
port 0; the load comes from this process. The machine is shared and small:
read medians and ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from ._servers import rss_kib

REGISTER = "/register_transfer_engine_info"
GET = "/get_transfer_engine_info"


def weights(rank: int, entries: int = 16) -> dict[str, Any]:
    """A weights_info_dict shaped like an engine's: a few dozen tensors' address, size, stride."""
    return {f"layers.{i}.weight": [0x7F0000000000 + rank * 4096 + i, 1 << 20, 2] for i in range(entries)}


def body(rank: int, session_id: str, entries: int = 16) -> bytes:
    payload = {
        "rank": rank,
        "transfer_engine_info": {"session_id": session_id, "weights_info_dict": weights(rank, entries)},
    }
    return json.dumps(payload).encode()


def pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [list(map(str, header))] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"\n## {title}\n")
    for index, row in enumerate(cells):
        print("| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) + " |")
        if index == 0:
            print("|" + "|".join("-" * (width + 2) for width in widths) + "|")


# -- a server subprocess ------------------------------------------------


@dataclass
class Server:
    proc: asyncio.subprocess.Process
    url: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_kib(self) -> int:
        return rss_kib(self.pid)["VmRSS"]

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    async def kill(self) -> None:
        self.proc.kill()
        await self.proc.wait()

    async def stop(self) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(10):
            return await self.proc.wait()


async def start_server(*args: str, python: str = sys.executable, env: dict[str, str] | None = None) -> Server:
    """``python -m aiobootstrap ARGS`` on a free port; ``python`` may be another tree's interpreter."""
    proc = await asyncio.create_subprocess_exec(
        python, "-m", "aiobootstrap", "--port", "0", "--log-level", "warning", *args,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        # Outside any checkout: -m imports the working directory's package first, which
        # would make another tree's interpreter run this tree.
        cwd=tempfile.gettempdir(),
    )  # fmt: skip
    assert proc.stdout is not None
    async with asyncio.timeout(15):
        line = (await proc.stdout.readline()).decode()
    if not line.startswith("aiobootstrap listening on "):
        raise RuntimeError(f"the server did not start: {line!r}")
    return Server(proc, line.split()[-1])


@asynccontextmanager
async def running(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[Server]:
    server = await start_server(*args, env=env)
    try:
        yield server
    finally:
        if server.proc.returncode is None:
            await server.stop()


def session(limit: int) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit))


# -- sync: the raw price of durability ----------------------------------


def sync_costs(directory: Path, commits: int = 1000) -> list[list[object]]:
    line = json.dumps(
        {"op": "put", "rank": 1, "version": 1, "session_id": "s", "weights_info_dict": weights(1)}
    )
    data = line.encode()
    framed = b"%08x %s\n" % (zlib.crc32(data), data)

    def journal(batch: int) -> list[float]:
        path = directory / "sync.journal"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
        times = []
        try:
            for _ in range(commits):
                start = time.perf_counter()
                os.write(fd, framed * batch)
                os.fdatasync(fd)
                times.append(time.perf_counter() - start)
        finally:
            os.close(fd)
            path.unlink()
        return times

    def sqlite(batch: int) -> list[float]:
        path = directory / "sync.sqlite"
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("pragma journal_mode=wal")
        db.execute("pragma synchronous=full")
        db.execute("create table records (rank integer primary key, version integer, info blob)")
        times = []
        try:
            for version in range(commits):
                start = time.perf_counter()
                db.execute("begin")
                db.executemany(
                    "insert or replace into records values (?, ?, ?)",
                    ((rank, version, data) for rank in range(batch)),
                )
                db.execute("commit")
                times.append(time.perf_counter() - start)
        finally:
            db.close()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return times

    rows: list[list[object]] = []
    for batch in (1, 64):
        for name, measure in (
            ("journal append + fdatasync", journal),
            ("SQLite WAL, synchronous=FULL", sqlite),
        ):
            times = measure(batch)
            rows.append(
                [name, batch, f"{pct(times, 0.5) * 1e3:.3f}", f"{pct(times, 0.99) * 1e3:.3f}",
                 f"{batch / statistics.median(times):,.0f}"]
            )  # fmt: skip
    return rows


# -- cost: in memory vs --state-file -------------------------------------


async def sequential(url: str, count: int, base: int) -> list[float]:
    times = []
    async with session(1) as http:
        for i in range(count):
            payload = body(base + i, f"seq-{i}")
            start = time.perf_counter()
            async with http.put(url + REGISTER, data=payload) as reply:
                await reply.read()
                assert reply.status == 200, reply.status
            times.append(time.perf_counter() - start)
    return times


async def storm(url: str, count: int, clients: int) -> tuple[float, list[float]]:
    """``count`` registrations from ``clients`` concurrent clients: (registrations/s, latencies)."""
    times: list[float] = []
    ranks = iter(range(count))

    async def client(http: aiohttp.ClientSession) -> None:
        for rank in ranks:
            payload = body(rank, f"storm-{rank}")
            start = time.perf_counter()
            async with http.put(url + REGISTER, data=payload) as reply:
                await reply.read()
                assert reply.status == 200, reply.status
            times.append(time.perf_counter() - start)

    async with session(clients) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        elapsed = time.perf_counter() - start
    return count / elapsed, times


async def registration_cost(directory: Path, rounds: int, count: int, clients: int) -> list[list[object]]:
    results: dict[str, dict[str, list[float]]] = {}
    for round_ in range(rounds):
        for mode in ("memory", "--state-file"):
            args = () if mode == "memory" else ("--state-file", str(directory / f"cost-{round_}.journal"))
            async with running(*args) as server:
                await sequential(server.url, 50, 10**6)  # warm up connections and code paths
                seq = await sequential(server.url, count, 0)
                rate, loaded = await storm(server.url, count * 4, clients)
            got = results.setdefault(mode, {"p50": [], "p99": [], "rate": [], "lp50": [], "lp99": []})
            got["p50"].append(pct(seq, 0.5))
            got["p99"].append(pct(seq, 0.99))
            got["rate"].append(rate)
            got["lp50"].append(pct(loaded, 0.5))
            got["lp99"].append(pct(loaded, 0.99))
    rows: list[list[object]] = []
    for mode, got in results.items():
        med = {key: statistics.median(values) for key, values in got.items()}
        rows.append(
            [mode, f"{med['p50'] * 1e3:.2f}", f"{med['p99'] * 1e3:.2f}", f"{med['rate']:,.0f}",
             f"{med['lp50'] * 1e3:.1f}", f"{med['lp99'] * 1e3:.1f}"]
        )  # fmt: skip
    memory, durable = (statistics.median(results[mode]["rate"]) for mode in ("memory", "--state-file"))
    rows.append(["durable / memory throughput", "", "", f"{durable / memory:.2f}x", "", ""])
    return rows


# -- crash: SIGKILL mid-storm, count acknowledged registrations lost -----


NAMESPACES = ("", "/ns/crash")
"""Half the crash-test clients register in the default namespace, half in another."""


@dataclass
class CrashRound:
    acked: dict[tuple[str, int], str] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)


async def storm_until_killed(server: Server, clients: int, round_: int, kill_after: float) -> CrashRound:
    result = CrashRound()
    stop = asyncio.Event()

    async def client(http: aiohttp.ClientSession, index: int) -> None:
        for seq in range(10**6):
            if stop.is_set():
                return
            rank = round_ * 10**6 + index * 10**4 + seq
            session_id = f"crash-{round_}-{index}-{seq}"
            prefix = NAMESPACES[index % 2]
            try:
                async with http.put(server.url + prefix + REGISTER, data=body(rank, session_id, 4)) as reply:
                    await reply.read()
                    if reply.status == 200:
                        result.acked[prefix, rank] = session_id
                    else:
                        result.errors[f"status {reply.status}"] += 1
            except (aiohttp.ClientError, ConnectionError):
                return  # the server died under us: this registration was never acknowledged

    async def killer() -> None:
        await asyncio.sleep(kill_after)
        await server.kill()
        stop.set()

    async with session(clients) as http:
        await asyncio.gather(killer(), *(client(http, index) for index in range(clients)))
    return result


async def listing(url: str) -> dict[tuple[str, int], str]:
    present = {}
    async with session(1) as http:
        for prefix in NAMESPACES:
            async with http.get(url + prefix + "/ranks") as reply:
                payload = await reply.json()
            present.update({(prefix, item["rank"]): item["session_id"] for item in payload["ranks"]})
    return present


async def crash_test(directory: Path, rounds: int, clients: int) -> list[list[object]]:
    path = directory / "crash.journal"
    rows: list[list[object]] = []
    everything: dict[tuple[str, int], str] = {}
    rng = random.Random(4)
    for round_ in range(rounds):
        server = await start_server("--state-file", str(path))
        result = await storm_until_killed(server, clients, round_, kill_after=rng.uniform(0.5, 1.5))
        everything.update(result.acked)
        start = time.perf_counter()
        async with running("--state-file", str(path)) as restarted:
            reload_ms = (time.perf_counter() - start) * 1e3
            present = await listing(restarted.url)
        lost = sum(1 for key, session_id in result.acked.items() if present.get(key) != session_id)
        unacked_kept = sum(1 for key in present if key[1] // 10**6 == round_ and key not in result.acked)
        rows.append(
            [round_ + 1, len(result.acked), lost, unacked_kept, len(present), f"{reload_ms:.0f}",
             dict(result.errors) or "none"]
        )  # fmt: skip
    async with running("--state-file", str(path)) as final:
        present = await listing(final.url)
    lost_overall = sum(1 for key, session_id in everything.items() if present.get(key) != session_id)
    rows.append(["all", len(everything), lost_overall, "", len(present), "", ""])
    return rows


# -- soak: mixed load, resources at start and end -------------------------


async def soak(directory: Path, seconds: float) -> tuple[list[list[object]], list[list[object]]]:
    path = directory / "soak.journal"
    counts: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    rng = random.Random(7)
    async with running("--state-file", str(path)) as server:
        url = server.url
        start_rss, start_fds = server.rss_kib(), server.open_fds()
        began = time.monotonic()
        deadline = began + seconds
        warm: list[int] = []

        async def after_warm_up() -> None:
            # Caches, buffers and the first compaction settle in the first seconds;
            # growth from here to the end is what a leak would show.
            await asyncio.sleep(min(10.0, seconds / 4))
            warm.extend([server.rss_kib(), server.open_fds()])

        async def loop(
            name: str, once: Callable[[aiohttp.ClientSession], Awaitable[None]], limit: int
        ) -> None:
            async with session(limit) as http:
                while time.monotonic() < deadline:
                    try:
                        await once(http)
                        counts[name] += 1
                    except Exception as exc:
                        errors[f"{name}: {type(exc).__name__} {exc}"[:120]] += 1

        async def expect(
            http: aiohttp.ClientSession, method: str, path: str, ok: set[int], **kw: Any
        ) -> None:
            async with http.request(method, url + path, **kw) as reply:
                await reply.read()
                if reply.status not in ok:
                    raise RuntimeError(f"status {reply.status} for {method} {path.split('?')[0]}")

        async def register(http: aiohttp.ClientSession) -> None:
            rank = rng.randrange(264) if rng.random() < 0.05 else rng.randrange(256)
            await expect(http, "PUT", REGISTER, {200}, data=body(rank, f"soak-{rng.random()}"))

        async def get(http: aiohttp.ClientSession) -> None:
            await expect(http, "GET", f"{GET}?rank={rng.randrange(300)}", {200, 404})

        async def wait(http: aiohttp.ClientSession) -> None:
            # Ranks 256-263 register rarely: most of these waits park, some are woken.
            await expect(http, "GET", f"{GET}?rank={256 + rng.randrange(8)}&wait=0.5&after=0", {200, 404})

        async def batch(http: aiohttp.ClientSession) -> None:
            await expect(http, "GET", "/get_transfer_engine_info_batch?ranks=0-63&wait=0.2", {200, 404})

        async def disconnect(http: aiohttp.ClientSession) -> None:
            # Park a long wait on a rank that never registers, then hang up.
            try:
                async with asyncio.timeout(rng.uniform(0.005, 0.1)):
                    await expect(http, "GET", f"{GET}?rank={10**5 + rng.randrange(10**4)}&wait=30", {404})
            except TimeoutError:
                pass

        async def ranks(http: aiohttp.ClientSession) -> None:
            await expect(http, "GET", "/ranks", {200})
            await asyncio.sleep(0.5)

        await asyncio.gather(
            *(loop("register", register, 4) for _ in range(4)),
            *(loop("get", get, 4) for _ in range(4)),
            *(loop("wait", wait, 16) for _ in range(16)),
            loop("batch", batch, 2),
            *(loop("disconnect", disconnect, 8) for _ in range(8)),
            loop("ranks", ranks, 1),
            after_warm_up(),
        )
        # The load has stopped; give the server a moment to notice the last hang-ups.
        await asyncio.sleep(1.0)
        end_rss, end_fds = server.rss_kib(), server.open_fds()
        journal_kib = path.stat().st_size / 1024
        status = await server.stop()
    resources: list[list[object]] = [
        ["server RSS (MiB)", f"{start_rss / 1024:.1f}", f"{warm[0] / 1024:.1f}", f"{end_rss / 1024:.1f}"],
        ["server open fds", start_fds, warm[1], end_fds],
        ["journal size (KiB)", "0", "", f"{journal_kib:.0f}"],
        ["exit status on SIGTERM", "", "", status],
    ]
    load: list[list[object]] = [
        [name, f"{counts[name]:,}"] for name in ("register", "get", "wait", "batch", "disconnect", "ranks")
    ]
    load.append(["errors", sum(errors.values())])
    load.extend([[f"  {text}", number] for text, number in errors.most_common(5)])
    return resources, load


# -- main -----------------------------------------------------------------

SECTIONS = ("sync", "cost", "crash", "soak")


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.durability", description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the state files go (default: a temp dir)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the cost section")
    parser.add_argument("--requests", type=int, default=500, help="sequential registrations per round")
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients in the storms")
    parser.add_argument("--crash-rounds", type=int, default=5)
    parser.add_argument("--soak-seconds", type=float, default=120.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aiobootstrap-durability-", dir=args.dir) as name:
        directory = Path(name)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, state files in {directory}")
        if "sync" in args.only:
            table(
                "Raw cost of one durable commit (same disk)",
                ["method", "changes/commit", "p50 ms", "p99 ms", "changes/s"],
                sync_costs(directory),
            )
        if "cost" in args.only:
            table(
                f"Registration cost, CLI server ({args.rounds} interleaved rounds, medians)",
                ["server", "1 client p50 ms", "1 client p99 ms", f"{args.clients} clients reg/s",
                 "loaded p50 ms", "loaded p99 ms"],
                await registration_cost(directory, args.rounds, args.requests, args.clients),
            )  # fmt: skip
        if "crash" in args.only:
            table(
                f"Crash test: SIGKILL mid-storm ({args.clients // 4} clients), restart, compare",
                ["round", "acknowledged", "lost", "unacknowledged but kept", "ranks on restart",
                 "restart ms", "errors"],
                await crash_test(directory, args.crash_rounds, max(2, args.clients // 4)),
            )  # fmt: skip
        if "soak" in args.only:
            resources, load = await soak(directory, args.soak_seconds)
            table(
                f"Soak: {args.soak_seconds:g} s of mixed load, --state-file",
                ["", "start", "warmed up", "end"],
                resources,
            )
            table("Soak: requests completed", ["kind", "count"], load)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
