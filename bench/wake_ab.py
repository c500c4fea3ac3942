"""Side by side: the wake-up of K parked waiters on two source trees of aiobootstrap.

``python -m bench.wake_ab --before /tmp/wake-before --trials 9`` starts one
server from this tree and one from ``--before`` (a checkout of an older
commit, e.g. ``git archive a73ffe7 aiobootstrap | tar -x -C /tmp/wake-before``),
then takes turns between them, one wake-up of ``--waiters`` lean waiters each,
so both see the same machine load. Per trial it reports the server's CPU for
the wake-up, read from ``/proc/PID/task/*/schedstat`` (nanoseconds, unlike the
10 ms ticks of ``/proc/PID/stat``), and p50/p99 of registration's 200 → first
reply byte; then the medians.

``--waiters 1,1000,4096`` runs the trials for each crowd size in turn.
``--memory 4096`` first parks that many waiters on each fresh server and
reports its RSS growth per parked waiter. ``--wrk SECONDS`` ends with
throughput rounds under ``wrk`` (GET of a small info, PUT of a 32-tensor and
of a 1,000-tensor info, 64 connections), taking turns between the servers,
each with the server's CPU per request.

``--profile DIR`` runs each server under ``cProfile``, switched on just before
the registration and off after the last reply, and writes one ``.pstats`` file
per server (all trials together) into DIR: profiler overhead inflates the
times, so take the figures from a run without it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import statistics
import sys
from pathlib import Path

from aiobootstrap.cli.main import loop_factory
from aiobootstrap.server.open_files import raise_open_file_limit

from ._data import registration, weights
from ._load import percentile
from ._scenarios import LONG_WAIT, REGISTER, THROUGHPUT_LOADS, _connect_many, _register, get_path
from ._servers import LOG_DIR, cpu_ns, rss_kib, start_in_tree
from ._wire import Target, connect, get_request, put_request
from ._wrk import run_wrk

ROOT = Path(__file__).resolve().parent.parent
BANNER = "aiobootstrap listening on "

# Runs the CLI with cProfile toggled by signals: USR1 on, USR2 off (and dump).
_PROFILED = """
import cProfile, signal, sys
try:
    from aiobootstrap.cli.main import main
except ImportError:  # a tree from before the floors
    from aiobootstrap._cli import main
profile = cProfile.Profile()
out = sys.argv[1]
signal.signal(signal.SIGUSR1, lambda *_: profile.enable())
def _off(*_):
    profile.disable()
    profile.dump_stats(out)
signal.signal(signal.SIGUSR2, _off)
raise SystemExit(main(sys.argv[2:]))
"""


class Server:
    def __init__(self, label: str, tree: Path, process: asyncio.subprocess.Process, url: str) -> None:
        self.label = label
        self.tree = tree
        self.process = process
        host, _, port = url.rpartition("//")[2].rpartition(":")
        self.target = Target(host, int(port))

    @classmethod
    async def start(cls, label: str, tree: Path, profile_to: Path | None, reference: bool = False) -> Server:
        args = ["--port", "0", "--log-level", "warning"]
        banner = BANNER
        if reference:
            argv, banner = ["-m", "bench.reference", "--port", "0"], "reference listening on "
        elif profile_to is None:
            argv = ["-m", "aiobootstrap", *args]
        else:
            argv = ["-c", _PROFILED, str(profile_to / f"{label}.pstats"), *args]
        process, url = await start_in_tree(label, tree, argv, banner, log="wake_ab")
        return cls(label, tree, process, url)

    def cpu_ns(self) -> int:
        return cpu_ns(self.process.pid)

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        await self.process.wait()


async def trial(server: Server, rank: int, waiters: int, profiling: bool) -> dict[str, float]:
    connections = await _connect_many(server.target, waiters, keep_body=False)
    replies = [c.send(get_request(get_path(rank, LONG_WAIT))) for c in connections]
    await asyncio.sleep(0.05 + waiters * 0.0003 + random.uniform(0.0, 0.05))
    put = put_request(REGISTER, registration(rank, weights(4)))
    # Open and answered once before the clock starts, as in make bench: the registration's time, not an accept's.
    registrar = await connect(server.target)
    await registrar.request(get_request("/health"))
    if profiling:
        server.signal(signal.SIGUSR1)
        await asyncio.sleep(0.05)
    cpu_before = server.cpu_ns()
    answer = await registrar.request(put)
    done = await asyncio.gather(*replies)
    cpu = server.cpu_ns() - cpu_before
    if profiling:
        server.signal(signal.SIGUSR2)
        await asyncio.sleep(0.2)
    registrar.close()
    for connection in connections:
        connection.close()
    if answer.status != 200 or any(reply.status != 200 for reply in done):
        raise RuntimeError(f"{server.label}: a request on rank {rank} was not answered 200")
    delays = [reply.first_byte_at - answer.first_byte_at for reply in done]
    # From the PUT leaving the client too: the figure above is negative when a
    # server answers the waiters before the registration (as a73ffe7 does).
    since_sent = [reply.first_byte_at - answer.sent_at for reply in done]
    return {
        "cpu_us_per_waiter": cpu / 1e3 / waiters,
        "p50_ms": statistics.median(delays) * 1e3,
        "p99_ms": percentile(delays, 0.99) * 1e3,
        "sent_p50_ms": statistics.median(since_sent) * 1e3,
        "sent_p99_ms": percentile(since_sent, 0.99) * 1e3,
        "sent_max_ms": max(since_sent) * 1e3,
    }


async def memory(server: Server, waiters: int) -> float:
    """KiB of server RSS per parked waiter: ``waiters`` parked on a fresh rank, then released."""
    await _register(server.target, 2_000_000)  # warm: the first registration builds caches
    before = rss_kib(server.process.pid)["VmRSS"]
    connections = await _connect_many(server.target, waiters, keep_body=False)
    replies = [c.send(get_request(get_path(2_000_001, LONG_WAIT))) for c in connections]
    await asyncio.sleep(0.5 + waiters * 0.0003)
    parked = rss_kib(server.process.pid)["VmRSS"]
    await _register(server.target, 2_000_001)
    await asyncio.gather(*replies)
    for connection in connections:
        connection.close()
    return (parked - before) / waiters


async def throughput(
    server: Server, load: str, bodies: list[bytes] | None, seconds: float
) -> dict[str, float]:
    path = THROUGHPUT_LOADS[load][0]
    cpu_before = server.cpu_ns()
    result = await run_wrk(server.target, path, bodies, seconds=seconds)
    cpu = server.cpu_ns() - cpu_before
    if any(result.errors.values()):
        raise RuntimeError(f"{server.label}: {load} had errors {result.errors}")
    return {"rps": result.rate, "cpu_us": cpu / 1e3 / max(1, result.requests)}


async def run(args: argparse.Namespace) -> None:
    # One "before" keeps its plain label; several are told apart by their directory names.
    befores = (
        {"before": args.before[0]} if len(args.before) == 1 else {tree.name: tree for tree in args.before}
    )
    trees = {**befores, "after": ROOT}
    servers = [await Server.start(label, tree, args.profile) for label, tree in trees.items()]
    crowds = [int(count) for count in str(args.waiters).split(",")]
    results: dict[tuple[int, str], list[dict[str, float]]] = {}
    # The medians printed at the end, per server label, also written to bench/results/wake_ab.json.
    summary: dict[str, dict[str, float]] = {}
    rates: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        if args.memory:
            for server in servers:
                kib = await memory(server, args.memory)
                summary.setdefault(server.label, {})["kb_per_parked_waiter"] = kib * 1.024
                print(
                    f"{server.label:>10}: {kib * 1.024:.2f} KB RSS per parked waiter ({args.memory:,} parked)"
                )
        rank = 0
        for waiters in crowds:
            for index in range(args.trials):
                # Alternate which server goes first, so neither always follows the other.
                order = servers if index % 2 == 0 else servers[::-1]
                for server in order:
                    figures = await trial(server, rank, waiters, args.profile is not None)
                    rank += 1
                    results.setdefault((waiters, server.label), []).append(figures)
                    print(f"{server.label:>10} {waiters:>5} trial {index + 1}: {_line(figures)}", flush=True)
        if args.wrk:
            bodies = {
                load: [registration(2 + i, weights(tensors)) for i in range(ranks)]
                for load, (_, tensors, ranks) in THROUGHPUT_LOADS.items()
                if tensors
            }
            loaded = list(servers)
            if args.reference:
                # The FastAPI reference (bench/reference.py), for the ratios; throughput only.
                reference = await Server.start("reference", ROOT, None, reference=True)
                servers.append(reference)
                loaded.append(reference)
            for server in loaded:
                await _register(server.target, 0, 4)
                await _register(server.target, 1, 1000)
            for index in range(args.rounds):
                for load in ("get_small", "put_32", "put_real"):
                    order = loaded if index % 2 == 0 else loaded[::-1]
                    for server in order:
                        figures = await throughput(server, load, bodies.get(load), args.wrk)
                        rates.setdefault((load, server.label), []).append(figures)
    finally:
        for server in servers:
            await server.stop()
    for waiters in crowds:
        print(f"medians of {args.trials} trials, {waiters} waiters:")
        for server in servers:
            trials = results.get((waiters, server.label), [])
            if trials:
                medians = {key: statistics.median(t[key] for t in trials) for key in trials[0]}
                print(f"{server.label:>10}: {_line(medians)}")
                summary.setdefault(server.label, {}).update(
                    {f"{waiters}.{key}": value for key, value in medians.items()}
                )
    if rates:
        print(f"wrk -t1 -c64, {args.wrk:g} s rounds, medians of {args.rounds}:")
        for (load, label), rounds in rates.items():
            rps = statistics.median(r["rps"] for r in rounds)
            cpu = statistics.median(r["cpu_us"] for r in rounds)
            print(f"{label:>10} {load:>9}: {rps:9,.0f} req/s, {cpu:7.1f} µs server CPU per request")
            summary.setdefault(label, {}).update({f"{load}.rps": rps, f"{load}.cpu_us": cpu})
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    (LOG_DIR / "wake_ab.json").write_text(json.dumps({"args": sys.argv[1:], "medians": summary}, indent=1))


def _line(figures: dict[str, float]) -> str:
    return (
        f"{figures['cpu_us_per_waiter']:5.1f} µs CPU/waiter; after the 200: "
        f"p50 {figures['p50_ms']:6.2f} ms, p99 {figures['p99_ms']:6.2f} ms; after the PUT was sent: "
        f"p50 {figures['sent_p50_ms']:6.2f} ms, p99 {figures['sent_p99_ms']:6.2f} ms, "
        f"last {figures['sent_max_ms']:6.2f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wake_ab", description=__doc__)
    parser.add_argument(
        "--before",
        type=Path,
        nargs="*",
        default=[],
        help="source tree(s) (with aiobootstrap/) to compare against",
    )
    parser.add_argument("--waiters", default="1000", help="crowd sizes, comma-separated")
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--memory", type=int, default=0, help="waiters to park for the RSS figure (0: none)")
    parser.add_argument("--wrk", type=float, default=0, help="seconds per wrk round (0: no throughput)")
    parser.add_argument("--rounds", type=int, default=3, help="wrk rounds per load and server")
    parser.add_argument(
        "--reference", action="store_true", help="add the FastAPI reference server to the wrk rounds"
    )
    parser.add_argument("--profile", type=Path, help="write each server's cProfile stats here")
    args = parser.parse_args()
    raise_open_file_limit()
    # The load generator runs on the server's loop (uvloop when installed): it must outrun the server.
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
