"""What one large registration costs the server: peak memory and event-loop time.

    python bench/body_cost.py [--mib 64] [--keys 1400000]

Runs the real CLI server in a subprocess on a free loopback port, sends one
registration of about ``--mib`` MiB whose weights dict has ``--keys`` keys,
and reports the server's peak RSS growth (VmHWM from /proc, Linux only) and
the longest /health round trip seen while it was parsed (the loop is blocked
for about that long). Then the same body parsed in this process, timed and
traced, for the share of the JSON parse.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import tracemalloc

import aiohttp

from aiobootstrap.wire.bodies import parse_body

from ._servers import rss_kib
from .durability import start_server


def body(mib: float, keys: int) -> bytes:
    pad = max(0, int(mib * 2**20 / keys) - 37)
    entries = ",".join(f'"w.{i:09d}":[{140_000_000_000 + i},{4096 + i},"{"x" * pad}"]' for i in range(keys))
    return (
        f'{{"rank":0,"transfer_engine_info":{{"session_id":"s","weights_info_dict":{{{entries}}}}}}}'.encode()
    )


async def served(data: bytes) -> tuple[float, float]:
    server = await start_server("--max-body-size", str(len(data)), "--max-body-memory", str(len(data)))
    url, pid = server.url, server.pid
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(url + "/health") as r:
                await r.read()
            before = rss_kib(pid)["VmRSS"] * 1024
            done = asyncio.Event()
            worst = 0.0

            async def probe() -> None:
                nonlocal worst
                async with aiohttp.ClientSession() as health:
                    while not done.is_set():
                        start = time.perf_counter()
                        async with health.get(url + "/health") as r:
                            await r.read()
                        worst = max(worst, time.perf_counter() - start)

            prober = asyncio.create_task(probe())
            async with session.put(url + "/register_transfer_engine_info", data=data) as r:
                assert r.status == 200, await r.text()
            done.set()
            await prober
            return rss_kib(pid)["VmHWM"] * 1024 - before, worst
    finally:
        await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=64)
    parser.add_argument("--keys", type=int, default=1_400_000)
    args = parser.parse_args()
    data = body(args.mib, args.keys)
    print(f"body: {len(data) / 2**20:.1f} MiB, {args.keys:,} keys")
    peak, worst = asyncio.run(served(data))
    print(
        f"server: peak RSS growth {peak / 2**20:.0f} MiB; longest /health round trip meanwhile {worst:.2f} s"
    )
    start = time.perf_counter()
    parse_body(data)
    parse = time.perf_counter() - start
    tracemalloc.start()
    parse_body(data)
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"in process: JSON parse {parse:.2f} s, its peak {traced / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
