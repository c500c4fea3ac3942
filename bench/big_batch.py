"""Big batch queries: what a rank set at the cap costs the server, parked and answered.

    python -m bench.big_batch [--parked 20] [--seconds 3]

Runs the app in this process on a free loopback port and measures, over raw
sockets:

- the reply to a batch naming a million ranks (a ``400`` naming the cap) and to
  one naming 65,536 unregistered ranks (a compact ``404``): size and time;
- ``--parked`` batch queries of 65,536 unregistered ranks parked with
  ``wait=60``: memory per parked query (``tracemalloc``, the server's side; the
  raw-socket clients hold almost nothing) and ``/health`` latency meanwhile;
- a query of 65,536 ranks parked, then woken by the last of 65,536
  registrations: the longest turn of the loop while it answers 5 MB, and the
  same query unparked;
- ``/health`` latency beside a client that loops on 65,536-rank queries (on an
  empty registry, after the registrations are cleared).

Exits 1 if a parked query holds more than ``BOUND`` bytes. Takes ~10 s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
import tracemalloc
from typing import Any

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._names import DEFAULT_NAMESPACE, DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.server.open_files import raise_open_file_limit
from aiobootstrap.store import Key

from ._servers import serve_in_process

BOUND = 256 * 1024
"""Bytes one parked 65,536-rank query may hold on the server (before rank sets: ~57 MiB for a million)."""

CAP_RANGE = "0-65535"
MILLION = "0-1048575"


async def _until(predicate: object, guard: float = 30.0) -> None:
    assert callable(predicate)
    async with asyncio.timeout(guard):
        while not predicate():  # noqa: ASYNC110 -- no hook to await: yield to the server's tasks
            await asyncio.sleep(0)


async def _request(port: int, target: str) -> tuple[int, int, float]:
    """One GET over a fresh connection: status, body bytes, seconds."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = await reader.read()
    seconds = time.perf_counter() - started
    writer.close()
    await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), len(body), seconds


async def _health_latencies(port: int, count: int, pause: float = 0.02) -> list[float]:
    latencies = []
    for _ in range(count):
        latencies.append((await _request(port, "/health"))[2])
        await asyncio.sleep(pause)
    return latencies


def _info(rank: int) -> dict[str, Any]:
    return {"session_id": f"10.0.0.{rank % 256}:18000", "weights_info_dict": {}}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


async def run(parked: int, seconds: float) -> int:
    app = create_app(ServerConfig(max_wait=300.0, max_ranks=None))
    runner, port = await serve_in_process(app)
    registry = app[REGISTRY]
    batch = "/get_transfer_engine_info_batch?ranks="
    try:
        status, size, took = await _request(port, batch + MILLION + "&wait=60")
        print(f"ranks={MILLION}&wait=60: {status}, {size} bytes, {_ms(took)}")
        answers = [await _request(port, batch + CAP_RANGE) for _ in range(5)]
        status, size = answers[0][:2]
        took = statistics.median(answer[2] for answer in answers)
        print(f"ranks={CAP_RANGE} (none registered): {status}, {size} bytes, median {_ms(took)}")

        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            writers = []
            for _ in range(parked):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(f"GET {batch}{CAP_RANGE}&wait=60 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                writers.append(writer)
            await _until(lambda: registry.parked == parked)
            gc.collect()
            held = (tracemalloc.get_traced_memory()[0] - before) / parked
        finally:
            tracemalloc.stop()
        health = await _health_latencies(port, 20)
        print(
            f"{parked} parked ranks={CAP_RANGE}&wait=60: {held / 1024:.1f} KiB each (bound {BOUND // 1024} KiB); "
            f"/health meanwhile median {_ms(statistics.median(health))}, max {_ms(max(health))}"
        )
        for writer in writers:
            writer.close()
        await _until(lambda: registry.parked == 0)

        # Every rank registered: the parked batch is woken by the last one and answers 65,536 records.
        for rank in range(65535, 0, -1):
            await registry.register(
                Key(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, DEFAULT_ROLE, rank), _info(rank)
            )
        parked_full = asyncio.create_task(_request(port, f"{batch}{CAP_RANGE}&wait=60"))
        await _until(lambda: registry.parked == 1)
        stalls: list[float] = []

        async def probe() -> None:
            last = time.perf_counter()
            while not parked_full.done():
                await asyncio.sleep(0)
                now = time.perf_counter()
                stalls.append(now - last)
                last = now

        prober = asyncio.create_task(probe())
        await asyncio.sleep(0.05)
        await registry.register(Key(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, DEFAULT_ROLE, 0), _info(0))
        status, size, took = await parked_full
        await prober
        answers = [await _request(port, batch + CAP_RANGE) for _ in range(3)]
        print(
            f"parked ranks={CAP_RANGE} woken by the last of 65,536 registrations: {status}, {size} bytes; "
            f"longest turn of the loop meanwhile {_ms(max(stalls))}; the same batch unparked: "
            f"median {_ms(statistics.median(answer[2] for answer in answers))}"
        )

        for rank in range(65536):
            await registry.unregister(Key(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, DEFAULT_ROLE, rank))
        stop = asyncio.Event()

        async def hammer() -> int:
            sent = 0
            while not stop.is_set():
                await _request(port, batch + CAP_RANGE)
                sent += 1
            return sent

        looper = asyncio.create_task(hammer())
        deadline = time.perf_counter() + seconds
        health = []
        while time.perf_counter() < deadline:
            health.extend(await _health_latencies(port, 5))
        stop.set()
        sent = await looper
        print(
            f"/health beside a client looping on ranks={CAP_RANGE} ({sent / seconds:.0f} queries/s): "
            f"median {_ms(statistics.median(health))}, max {_ms(max(health))} over {len(health)} requests"
        )
    finally:
        await runner.cleanup()
    return 0 if held <= BOUND else 1


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.big_batch", description=__doc__.split("\n")[0])
    parser.add_argument("--parked", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    raise_open_file_limit()
    return asyncio.run(run(args.parked, args.seconds))


if __name__ == "__main__":
    sys.exit(main())
