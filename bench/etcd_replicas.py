"""etcd as a store through HTTP replicas, side by side with Redis and with one process in memory (issue 31).

A three-member etcd cluster (Debian's ``etcd``, free loopback ports,
temporary data directories), a redis-server of the benchmark's own (AOF,
``appendfsync always``), three ``python -m aiobootstrap`` replicas over the
cluster, one over Redis and one in memory. Figures:

- a registration's latency (PUT to its ``200``, one client), p50 and p99:
  memory, Redis, etcd;
- ``GET`` and ``PUT`` throughput through one replica under ``wrk -t1 -c64``
  (each load through each server in turn, round after round, medians);
- one waiter parked on replica B woken by a registration through replica A,
  from A's ``200`` to B's first reply byte (the target: 2 ms at most), and
  1,000 waiters spread over A and B woken by one registration through C;
- the leader SIGKILLed while two replicas register one rank after another:
  the death to the first ``200`` through each for a request sent after it
  (median over the kills), beside the same for a Sentinel deployment's
  primary (``down-after-milliseconds`` 1000, ``bench.failover``'s figure) in
  the same run.

``python -m bench.etcd_replicas`` (``--kills N``, 5 by default; ``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testbed.etcd_server import Cluster, Member, skip_reason
from testbed.sentinel_cluster import SentinelCluster

from ._replicas import Measured, _cross_wake, _redis, _registration_latency, _throughput
from ._scenarios import _summary
from ._servers import SERVERS, RunningServer
from ._wrk import find_wrk
from .failover import failover, kills_to_first_ack


async def leader_kills(cluster: Cluster, kills: int) -> dict[str, list[float]]:
    """The leader SIGKILLed ``kills`` times under two replicas' registrations, started again (a follower, on
    its data directory) before the next: seconds to each replica's first 200."""
    killed: list[Member] = []

    async def kill() -> None:
        killed.append(await asyncio.to_thread(cluster.leader))
        killed[-1].kill()

    async def heal() -> None:
        while killed:
            killed.pop().start()
        await asyncio.to_thread(cluster.wait_healthy)

    try:
        return await kills_to_first_ack(cluster.url(), kills, kill, heal)
    finally:
        await heal()


def _kills_summary(seconds: dict[str, list[float]]) -> dict[str, float]:
    every = [value for values in seconds.values() for value in values]
    return {"median_s": statistics.median(every), "max_s": max(every), "kills": len(every) // len(seconds)}


async def main(kills: int, quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="aiobootstrap-bench-etcd-") as directory:
        cluster = Cluster(Path(directory) / "etcd", size=3)
        await asyncio.to_thread(cluster.start)
        servers: list[RunningServer] = []
        try:
            async with _redis() as (redis_url, redis_pid):
                memory = await RunningServer.start(SERVERS["aiobootstrap"])
                servers.append(memory)
                redis = await RunningServer.start(SERVERS["aiobootstrap"], "--store", redis_url)
                servers.append(redis)
                etcd = []
                for _ in range(3):
                    etcd.append(
                        await RunningServer.start(SERVERS["aiobootstrap"], "--store", cluster.url("bench"))
                    )
                    servers.append(etcd[-1])
                a, b, c = etcd
                count = 50 if quick else 200
                out["register_latency"] = {
                    "memory": await _registration_latency(memory, count),
                    "redis (AOF always)": await _registration_latency(redis, count),
                    "etcd (3 members)": await _registration_latency(a, count),
                }
                if find_wrk() is not None:
                    groups: dict[str, Sequence[Measured]] = {
                        "memory": [memory],
                        "redis": [redis],
                        "etcd": [a],
                    }
                    # etcd's CPU is its leader's (the followers' is the cluster's price beside it).
                    leader = await asyncio.to_thread(cluster.leader)
                    pids: dict[str, int | None] = {
                        "redis": redis_pid,
                        "etcd": leader.process.pid if leader.process else None,
                    }
                    out["throughput"] = await _throughput(
                        groups, pids, 1.5 if quick else 3.0, 2 if quick else 3, True
                    )
                single: list[float] = []
                for trial in range(10 if quick else 40):
                    single += await _cross_wake([b], a, 10_000 + trial, 1)
                out["cross_wake_one"] = _summary(single)
                crowd: list[float] = []
                for trial in range(1 if quick else 3):
                    crowd += await _cross_wake([a, b], c, 20_000 + trial, 1000)
                out["cross_wake_1000"] = _summary(crowd)
        finally:
            for server in servers:
                await server.stop()
        try:
            out["leader_kill"] = _kills_summary(await leader_kills(cluster, kills))
        finally:
            cluster.stop()
    with tempfile.TemporaryDirectory(prefix="aiobootstrap-bench-sentinel-") as directory:
        sentinels = SentinelCluster(Path(directory), down_after_ms=1000)
        try:
            await asyncio.to_thread(sentinels.start)
            out["sentinel_failover"] = _kills_summary(await failover(sentinels, kills))
        finally:
            sentinels.stop()
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=5, help="leader (and primary) kills (default: 5)")
    parser.add_argument("--quick", action="store_true", help="fewer registrations, waits and rounds")
    arguments = parser.parse_args()
    if (reason := skip_reason()) is not None:
        raise SystemExit(f"bench.etcd_replicas: {reason}")
    results = asyncio.run(main(arguments.kills, arguments.quick))
    for figure, values in results.items():
        print(json.dumps({"figure": figure, **values}, default=str))
