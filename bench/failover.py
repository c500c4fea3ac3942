"""Failover figures: a Sentinel deployment, its primary killed, and what ``--store-min-replicas`` costs.

Run from the repository root (docs/benchmarks.md's "Failover" section came from this)::

    .venv/bin/python -m bench.failover             # 5 kills and 400 registrations a side
    .venv/bin/python -m bench.failover --kills 2 --registrations 100

Sections:

``failover``  one primary, one replica, three Sentinels (``down-after-milliseconds``
              1000), two ``python -m aiobootstrap`` replicas on the Sentinel URL,
              each registering one rank after another. The primary is killed
              (SIGKILL); the figure is the time from its death to the first ``200``
              through each replica for a request sent after it. Then the killed
              node comes back as a replica, and the next kill follows: median and
              max over the kills.
``cost``      one client registering one rank at a time through a replica with
              ``--store-min-replicas 1`` and one without, rounds interleaved, on
              the same healthy deployment: median and p99 latency, and the ratio.

Every process is real and on 127.0.0.1 (free ports, a temporary directory).
The machine is shared and small: read medians and ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import aiohttp

from testbed.redis_server import REDIS_SERVER
from testbed.sentinel_cluster import SentinelCluster

REGISTER = "/register_transfer_engine_info"


def _body(rank: int) -> bytes:
    info = {"session_id": f"10.0.0.7:{18000 + rank % 1000}", "weights_info_dict": {"w": [rank, 1 << 20, 2]}}
    return json.dumps({"rank": rank, "transfer_engine_info": info}).encode()


class Replica:
    """One ``python -m aiobootstrap`` on a free port, over the deployment's Sentinel URL."""

    def __init__(self, url: str, prefix: str, *options: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aiobootstrap",
                "--port",
                "0",
                "--store",
                url,
                "--store-prefix",
                prefix,
                *options,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"aiobootstrap did not start: {line!r}")
        self.url = line.rsplit(" ", 1)[1].strip()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


async def _first_ack_after(
    session: aiohttp.ClientSession, replica: Replica, killed: asyncio.Event, start: int
) -> float:
    """Register one rank after another; the monotonic time of the first 200 for a request sent after ``killed``."""
    rank = start
    while True:
        sent_after = killed.is_set()
        rank += 1
        try:
            async with session.put(replica.url + REGISTER, data=_body(rank)) as reply:
                ok = reply.status == 200
                await reply.read()
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        if ok and sent_after:
            return time.monotonic()
        if not ok:
            await asyncio.sleep(0.01)


async def kills_to_first_ack(
    store_url: str, kills: int, kill: Callable[[], Awaitable[object]], heal: Callable[[], Awaitable[object]]
) -> dict[str, list[float]]:
    """Two replicas over ``store_url`` each register one rank after another while ``kill`` kills the store's
    primary (or leader), ``kills`` times, ``heal`` before each: the seconds from each death to each
    replica's first ``200`` for a request sent after it."""
    replicas = [Replica(store_url, "failover") for _ in range(2)]
    seconds: dict[str, list[float]] = {"A": [], "B": []}
    timeout = aiohttp.ClientTimeout(total=5)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for round_ in range(kills):
                await heal()
                killed = asyncio.Event()
                probes = [
                    asyncio.create_task(
                        _first_ack_after(session, replica, killed, (round_ * 2 + i) * 1_000_000)
                    )
                    for i, replica in enumerate(replicas)
                ]
                await asyncio.sleep(0.3)  # both replicas registering before the kill
                await kill()
                died = time.monotonic()
                killed.set()
                acks = await asyncio.wait_for(asyncio.gather(*probes), 60)
                for name, ack in zip(seconds, acks, strict=True):
                    seconds[name].append(ack - died)
                print(
                    f"kill {round_ + 1}: " + ", ".join(f"{n} {s[-1]:.2f} s" for n, s in seconds.items()),
                    flush=True,
                )
    finally:
        for replica in replicas:
            replica.stop()
    return seconds


async def failover(cluster: SentinelCluster, kills: int) -> dict[str, list[float]]:
    """The Sentinel deployment's primary SIGKILLed, healed (back as a replica) before each kill."""

    async def kill() -> None:
        cluster.kill_primary()

    return await kills_to_first_ack(cluster.url, kills, kill, lambda: asyncio.to_thread(cluster.heal))


async def cost(cluster: SentinelCluster, registrations: int, rounds: int = 5) -> dict[str, list[float]]:
    await asyncio.to_thread(cluster.heal)
    sides = {
        "min-replicas 0": Replica(cluster.url, "cost-0"),
        "min-replicas 1": Replica(cluster.url, "cost-1", "--store-min-replicas", "1"),
    }
    latencies: dict[str, list[float]] = {name: [] for name in sides}
    try:
        async with aiohttp.ClientSession() as session:
            for round_ in range(rounds):
                for index, (name, replica) in enumerate(sides.items()):
                    for i in range(registrations // rounds):
                        rank = (round_ * 2 + index) * 100_000 + i
                        started = time.perf_counter()
                        async with session.put(replica.url + REGISTER, data=_body(rank)) as reply:
                            await reply.read()
                            assert reply.status == 200, reply.status
                        latencies[name].append(time.perf_counter() - started)
    finally:
        for replica in sides.values():
            replica.stop()
    return latencies


def _pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--registrations", type=int, default=400, help="per side, for the cost section")
    args = parser.parse_args(argv)
    if REDIS_SERVER is None:
        print("bench.failover: redis-server is not on PATH (apt-get install redis-server)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="aiobootstrap-failover-") as directory:
        cluster = SentinelCluster(Path(directory), down_after_ms=1000)
        try:
            await asyncio.to_thread(cluster.start)
            seconds = await failover(cluster, args.kills)
            latencies = await cost(cluster, args.registrations)
        finally:
            cluster.stop()
    print("\n## Failover: the primary's death to the first acknowledged registration (down-after 1000 ms)\n")
    print("| through | median | max | kills |\n|---|---|---|---|")
    for name, values in seconds.items():
        print(f"| replica {name} | {statistics.median(values):.2f} s | {max(values):.2f} s | {len(values)} |")
    print("\n## Registration latency, one client, --store-min-replicas 1 vs 0\n")
    print("| replica | p50 | p99 | registrations |\n|---|---|---|---|")
    for name, values in latencies.items():
        print(
            f"| {name} | {statistics.median(values) * 1e3:.2f} ms | {_pct(values, 0.99) * 1e3:.2f} ms | {len(values)} |"
        )
    ratio = statistics.median(latencies["min-replicas 1"]) / statistics.median(latencies["min-replicas 0"])
    print(f"\np50 ratio, min-replicas 1 / 0: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
