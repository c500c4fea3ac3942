"""The Redis store alone, without HTTP: what a registration, a cross-replica wake and a get cost.

Run from the repository root (needs ``redis-server`` on PATH and the redis extra)::

    .venv/bin/python -m bench.store_redis            # three rounds, about half a minute
    .venv/bin/python -m bench.store_redis --rounds 1

It starts its own redis-server on a free loopback port in a temporary
directory (``appendonly yes``, ``appendfsync always``, no snapshots), opens
two ``RedisStore``s on it (replicas A and B, in this one process and loop)
and measures, each round:

``put``        latency of one put through A, one at a time (AOF always, then everysec)
``feed``       from a put's start on A to B's listener hearing the change, and from
               the put's return to it (negative: B heard before A's reply was read)
``gets/s``     gets of one stored key through A by 64 concurrent tasks, for 2 s;
               the memory store beside it for scale
``puts/s``     puts (1,024 ranks, replaced in turn) through A by 64 concurrent tasks, for 2 s

It prints the median of the rounds' medians. The machine is shared and
small: read ratios, not absolutes. Not part of ``make bench`` (yet).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiobootstrap._names import TRANSFER_ENGINE_INFO
from aiobootstrap.store import Change, Key, MemoryStore, Store
from aiobootstrap.store.redis import RedisStore

VALUE = {
    "session_id": "10.0.0.7:18000",
    "weights_info_dict": {f"layers.{i}.weight": [0x7F0000000000 + i * 4096, 1 << 20, 2] for i in range(16)},
}


class Heard:
    """A listener that resolves a future when a change of the awaited key arrives."""

    def __init__(self) -> None:
        self.waiting: dict[tuple[Key, int], asyncio.Future[float]] = {}

    def changed(self, changes: Sequence[Change]) -> None:
        now = time.perf_counter()
        for change in changes:
            future = self.waiting.pop((change.key, change.version), None)
            if future is not None and not future.done():
                future.set_result(now)

    def resync(self) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_redis(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    executable = shutil.which("redis-server")
    if executable is None:
        sys.exit("redis-server is not on PATH")
    port = _free_port()
    process = subprocess.Popen(
        [
            executable,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--dir",
            str(directory),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--logfile",
            str(directory / "redis.log"),
        ],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.02)
    process.kill()
    sys.exit("redis-server did not start")


def _key(rank: int) -> Key:
    return Key("default", TRANSFER_ENGINE_INFO, "target", rank)


async def put_latency(store: Store, count: int) -> list[float]:
    times = []
    for rank in range(count):
        start = time.perf_counter()
        await store.put(_key(rank % 256), VALUE)
        times.append(time.perf_counter() - start)
    return times


async def feed_latency(a: Store, heard_on_b: Heard, count: int) -> tuple[list[float], list[float]]:
    from_start, from_return = [], []
    loop = asyncio.get_running_loop()
    for rank in range(count):
        key = _key(rank % 256)
        version = await a.version("default") + 1  # nobody else writes: the put takes this one
        future: asyncio.Future[float] = loop.create_future()
        heard_on_b.waiting[(key, version)] = future
        start = time.perf_counter()
        record = await a.put(key, VALUE)
        returned = time.perf_counter()
        assert record.version == version
        heard = await asyncio.wait_for(future, 5)
        from_start.append(heard - start)
        from_return.append(heard - returned)
    return from_start, from_return


async def gets_per_second(store: Store, seconds: float = 2.0, tasks: int = 64) -> float:
    await store.put(_key(0), VALUE)
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await store.get(_key(0))
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    return done / (time.perf_counter() - start)


async def puts_per_second(store: Store, seconds: float = 2.0, tasks: int = 64) -> float:
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(first: int) -> None:
        nonlocal done
        rank = first
        while time.perf_counter() < deadline:
            await store.put(_key(rank % 1024), VALUE)
            done += 1
            rank += tasks

    start = time.perf_counter()
    await asyncio.gather(*(worker(first) for first in range(tasks)))
    return done / (time.perf_counter() - start)


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


async def one_round(url: str, count: int) -> dict[str, float]:
    heard_on_a, heard_on_b = Heard(), Heard()
    a, b = RedisStore(url), RedisStore(url)
    await a.open(heard_on_a)
    await b.open(heard_on_b)
    memory = MemoryStore()
    await memory.open(Heard())
    try:
        result: dict[str, Any] = {}
        always = await put_latency(a, count)
        result["put p50 ms (AOF always)"] = _ms(always)
        result["put p99 ms (AOF always)"] = sorted(always)[int(len(always) * 0.99)] * 1000
        client = a._connection.client
        assert client is not None
        await client.config_set("appendfsync", "everysec")
        result["put p50 ms (AOF everysec)"] = _ms(await put_latency(a, count))
        await client.config_set("appendfsync", "always")
        from_start, from_return = await feed_latency(a, heard_on_b, count)
        result["feed p50 ms, put start on A -> B heard"] = _ms(from_start)
        result["feed p50 ms, put return on A -> B heard"] = _ms(from_return)
        result["gets/s through one RedisStore (64 tasks)"] = await gets_per_second(a)
        result["gets/s through the MemoryStore (64 tasks)"] = await gets_per_second(memory)
        result["puts/s through one RedisStore (64 tasks)"] = await puts_per_second(a)
        result["puts/s through the MemoryStore (64 tasks)"] = await puts_per_second(memory)
        result["put p50 ms (MemoryStore)"] = _ms(await put_latency(memory, count))
        return result
    finally:
        await a.close()
        await b.close()
        await memory.close()


async def main(rounds: int, count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="aiobootstrap-bench-") as directory:
        process, url = _start_redis(Path(directory))
        try:
            results = [await one_round(url, count) for _ in range(rounds)]
        finally:
            process.kill()
            process.wait()
    print(f"Redis store alone, {rounds} round(s) of {count} operations; median of the rounds")
    for name in results[0]:
        value = statistics.median(result[name] for result in results)
        shown = f"{value:,.0f}" if value >= 100 else f"{value:.3f}"
        print(f"  {name:<46} {shown:>10}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=500, help="puts (and feed round trips) per round")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.count))
