"""The etcd store alone, without HTTP, beside the Redis store and the memory store: what a write, a get,
a cross-replica wake and a leader's death cost.

Run from the repository root (needs ``etcd`` and ``redis-server`` on PATH, and the etcd and redis
extras)::

    .venv/bin/python -m bench.store_etcd             # three rounds and five kills, about a minute
    .venv/bin/python -m bench.store_etcd --rounds 1 --kills 3

It starts a three-member etcd cluster (etcd's default election settings) and one redis-server
(``appendonly yes``, ``appendfsync always``) on free loopback ports in a temporary directory, and
opens two stores on each (replicas A and B, in this one process and loop). Each round:

``put p50/p99``  one put through A at a time (a registration's store write)
``wake``         from a put's return on A to B's listener hearing it (B's waiters woken)
``puts/s``       puts (1,024 ranks, replaced in turn) through A by 64 concurrent tasks, for 2 s
``gets/s``       gets of one key through A by 64 concurrent tasks, for 2 s

Then ``--kills`` times: the etcd leader SIGKILLed while A puts one rank after another; the time from
the kill to the first put acknowledged that was started after it, then the member started again.
It prints the median of the rounds. The machine is shared and small: read ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiobootstrap.exceptions import StoreUnavailable
from aiobootstrap.store import MemoryStore, Store
from aiobootstrap.store.etcd import EtcdStore
from aiobootstrap.store.redis import RedisStore
from testbed.etcd_server import Cluster

from .store_redis import VALUE, Heard, _key, _start_redis, gets_per_second, put_latency, puts_per_second


async def _wakes(a: Store, heard_on_b: Heard, count: int) -> list[float]:
    loop = asyncio.get_running_loop()
    wakes = []
    for rank in range(count):
        key = _key(rank % 256)
        version = await a.version("default") + 1
        future: asyncio.Future[float] = loop.create_future()
        heard_on_b.waiting[(key, version)] = future
        await a.put(key, VALUE)
        returned = time.perf_counter()
        wakes.append(await asyncio.wait_for(future, 5) - returned)
    return wakes


def _p(values: list[float], share: float) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * share))] * 1000


async def one_round(name: str, a: Store, heard_on_b: Heard | None, count: int) -> dict[str, float]:
    puts = await put_latency(a, count)
    row = {"put p50 ms": _p(puts, 0.5), "put p99 ms": _p(puts, 0.99)}
    if heard_on_b is not None:
        wakes = await _wakes(a, heard_on_b, count)
        row["wake p50 ms"], row["wake p99 ms"] = _p(wakes, 0.5), _p(wakes, 0.99)
    row["puts/s"] = await puts_per_second(a)
    row["gets/s"] = await gets_per_second(a)
    del name
    return row


async def _register_until(store: Store, stop: asyncio.Event) -> None:
    rank = 0
    while not stop.is_set():
        with contextlib.suppress(StoreUnavailable):
            await store.put(_key(rank % 256), VALUE)
        rank += 1


async def leader_kills(cluster: Cluster, url: str, kills: int) -> list[float]:
    store = EtcdStore(url)
    await store.open(Heard())
    figures = []
    try:
        for kill in range(kills):
            stop = asyncio.Event()
            writer = asyncio.create_task(_register_until(store, stop))
            await asyncio.sleep(0.5)
            leader = await asyncio.to_thread(cluster.leader)
            leader.kill()
            killed = time.perf_counter()
            while True:
                start = time.perf_counter()
                try:
                    await store.put(_key(1000 + kill), VALUE)
                except StoreUnavailable:
                    await asyncio.sleep(0.01)
                    continue
                if start >= killed:
                    figures.append(time.perf_counter() - killed)
                    break
            stop.set()
            await writer
            leader.start()
            await asyncio.to_thread(cluster.wait_healthy)
    finally:
        await store.close()
    return figures


async def main(rounds: int, count: int, kills: int) -> None:
    if shutil.which("etcd") is None or shutil.which("redis-server") is None:
        sys.exit("etcd and redis-server must be on PATH")
    with tempfile.TemporaryDirectory(prefix="aiobootstrap-bench-") as directory:
        cluster = Cluster(Path(directory) / "etcd", 3)
        redis_process: subprocess.Popen[bytes] | None = None
        try:
            cluster.start()
            redis_process, redis_url = _start_redis(Path(directory))
            etcd_url = cluster.url("bench")
            rows: dict[str, list[dict[str, float]]] = {}
            for _ in range(rounds):
                for name, make in (
                    ("etcd, three members", lambda: EtcdStore(etcd_url)),
                    ("Redis, appendfsync always", lambda: RedisStore(redis_url)),
                ):
                    heard_on_a, heard_on_b = Heard(), Heard()
                    a, b = make(), make()
                    await a.open(heard_on_a)
                    await b.open(heard_on_b)
                    try:
                        rows.setdefault(name, []).append(await one_round(name, a, heard_on_b, count))
                    finally:
                        await a.close()
                        await b.close()
                memory = MemoryStore()
                await memory.open(Heard())
                rows.setdefault("memory, one process", []).append(
                    await one_round("memory", memory, None, count)
                )
                await memory.close()
            killed = await leader_kills(cluster, etcd_url, kills)
        finally:
            cluster.stop()
            if redis_process is not None:
                redis_process.kill()
                redis_process.wait()
    columns = ["put p50 ms", "put p99 ms", "wake p50 ms", "wake p99 ms", "puts/s", "gets/s"]
    print(f"Stores alone, {rounds} round(s) of {count} puts; median of the rounds")
    print("| store | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, results in rows.items():
        cells = []
        for column in columns:
            values = [result[column] for result in results if column in result]
            value = statistics.median(values) if values else None
            cells.append("—" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(
        f"etcd leader SIGKILLed → first put acknowledged after it: median {statistics.median(killed):.2f} s, "
        f"max {max(killed):.2f} s, {len(killed)} kills"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=300, help="puts (and wakes) per round")
    parser.add_argument("--kills", type=int, default=5)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.count, arguments.kills))
