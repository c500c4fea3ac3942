"""Scenario 7 (issue 8): replicas over one Redis beside one process in memory, in one run.

A ``redis-server`` of its own (free port, temporary directory, AOF with
``appendfsync always``), three replicas of ``python -m aiobootstrap --store
redis://...`` and one in-memory server, all on loopback. Figures:

- a registration's own latency (PUT to its ``200``), Redis vs memory;
- one waiter parked on replica B woken by a registration through replica A,
  from A's ``200`` to B's first reply byte;
- 1,000 waiters spread over A and B, woken by one registration through C;
- GET and PUT throughput through one replica vs the in-memory server, with
  each process's CPU per request (the replica's and Redis's);
- a gather of 4,096 ranks on B while they register through A.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
import socket
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ._data import registration, weights
from ._load import closed_loop
from ._scenarios import LONG_WAIT, REGISTER, Settings, _connect_many, _register, _summary, get_path
from ._servers import SERVERS, RunningServer, cpu_seconds
from ._wire import connect, get_request, put_request

__all__ = ["replicas"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def _redis() -> AsyncIterator[tuple[str, int]]:
    """A redis-server of the benchmark's own, durable as docs/scale-out.md advises: its URL and pid."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (Debian: redis-server)")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="aiobootstrap-bench-redis-") as directory:
        process = await asyncio.create_subprocess_exec(
            binary,
            "--port", str(port), "--bind", "127.0.0.1", "--dir", directory,
            "--appendonly", "yes", "--appendfsync", "always", "--save", "",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            async with asyncio.timeout(10):
                while True:
                    try:
                        _, writer = await asyncio.open_connection("127.0.0.1", port)
                    except OSError:
                        await asyncio.sleep(0.02)
                        continue
                    writer.close()
                    break
            yield f"redis://127.0.0.1:{port}/0", process.pid
        finally:
            process.send_signal(signal.SIGTERM)
            await process.wait()


async def _registration_latency(server: RunningServer, count: int) -> dict[str, float]:
    connection = await connect(server.target)
    body = registration(0, weights(4))
    latencies = []
    try:
        for _ in range(count):
            reply = await connection.request(put_request(REGISTER, body))
            latencies.append(reply.done_at - reply.sent_at)
    finally:
        connection.close()
    return _summary(latencies)


async def _cross_wake(
    waiting_on: list[RunningServer], writer: RunningServer, rank: int, waiters: int
) -> list[float]:
    """``waiters`` long-polls spread over ``waiting_on``; one registration through ``writer``."""
    connections = []
    for index, server in enumerate(waiting_on):
        share = waiters // len(waiting_on) + (1 if index < waiters % len(waiting_on) else 0)
        connections += await _connect_many(server.target, share)
    request = get_request(get_path(rank, LONG_WAIT))
    replies = [connection.send(request) for connection in connections]
    await asyncio.sleep(0.1 + waiters * 0.0003)
    await asyncio.sleep(random.uniform(0.0, 0.02))
    put = await _register(writer.target, rank)
    done = await asyncio.gather(*replies)
    for connection in connections:
        connection.close()
    if any(reply.status != 200 for reply in done):
        raise RuntimeError(f"a waiter on rank {rank} was not answered 200")
    return [reply.first_byte_at - put.first_byte_at for reply in done]


async def _throughput(
    server: RunningServer, redis_pid: int | None, seconds: float, rounds: int
) -> dict[str, Any]:
    put_small = [put_request(REGISTER, registration(2 + i, weights(4))) for i in range(1024)]
    loads = {
        "get_small": lambda i: get_request(get_path(0)),
        "put_small": lambda i: put_small[i % 1024],
    }
    await _register(server.target, 0, 4)
    out: dict[str, Any] = {}
    for load, request_for in loads.items():
        rates, server_us, redis_us = [], [], []
        for _ in range(rounds):
            cpu = server.cpu_seconds()
            store_cpu = cpu_seconds(redis_pid) if redis_pid else 0.0
            result = await closed_loop(server.target, request_for, concurrency=64, seconds=seconds)
            # The whole run's CPU over the requests counted in its window: an
            # estimate that includes the warm-up's few requests.
            total = max(1, result.requests)
            rates.append(result.rate)
            server_us.append((server.cpu_seconds() - cpu) * 1e6 / total)
            if redis_pid:
                redis_us.append((cpu_seconds(redis_pid) - store_cpu) * 1e6 / total)
        out[load] = {
            "rps": statistics.median(rates),
            "server_us_per_request": statistics.median(server_us),
            "redis_us_per_request": statistics.median(redis_us) if redis_us else None,
        }
    return out


async def _gather(consumer_on: RunningServer, writer: RunningServer, ranks: int) -> dict[str, float]:
    # A namespace of its own: the throughput runs registered ranks in the default one.
    consumer = await connect(consumer_on.target)
    reply_future = consumer.send(
        get_request(f"/ns/gather/get_transfer_engine_info_batch?ranks=0-{ranks - 1}&wait={LONG_WAIT}")
    )
    await asyncio.sleep(0.1)
    pool = await _connect_many(writer.target, 64)
    bodies = iter([registration(rank, weights(4)) for rank in range(ranks)])
    last_put = 0.0

    async def worker(connection: Any) -> None:
        nonlocal last_put
        for body in bodies:
            reply = await connection.request(put_request(f"/ns/gather{REGISTER}", body))
            if reply.status != 200:
                raise RuntimeError(f"a registration answered {reply.status}")
            last_put = max(last_put, reply.first_byte_at)

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in pool))
    reply = await reply_future
    for connection in [*pool, consumer]:
        connection.close()
    if reply.status != 200:
        raise RuntimeError(f"the gather answered {reply.status}")
    return {
        "ranks": ranks,
        "register_seconds": last_put - started,
        "after_last_registration_s": reply.done_at - last_put,
    }


async def replicas(settings: Settings) -> dict[str, Any]:
    """Scenario 7: three replicas over one Redis (AOF always) beside one in-memory server."""
    out: dict[str, Any] = {}
    async with _redis() as (url, redis_pid):
        store = ("--store", url)
        memory = await RunningServer.start(SERVERS["aiobootstrap"])
        a = await RunningServer.start(SERVERS["aiobootstrap"], *store)
        b = await RunningServer.start(SERVERS["aiobootstrap"], *store)
        c = await RunningServer.start(SERVERS["aiobootstrap"], *store)
        try:
            count = 50 if settings.quick else 200
            out["register_latency"] = {
                "memory": await _registration_latency(memory, count),
                "redis": await _registration_latency(a, count),
            }
            single: list[float] = []
            for trial in range(settings.wake_single_trials * 2):
                single += await _cross_wake([b], a, 10_000 + trial, 1)
            out["cross_wake_one"] = _summary(single)
            crowd: list[float] = []
            for trial in range(settings.wake_crowd_trials):
                crowd += await _cross_wake([a, b], c, 20_000 + trial, 1000)
            out["cross_wake_1000"] = _summary(crowd)
            rounds = settings.throughput_rounds
            out["throughput"] = {
                "memory": await _throughput(memory, None, settings.throughput_seconds, rounds),
                "redis": await _throughput(a, redis_pid, settings.throughput_seconds, rounds),
            }
            out["gather"] = await _gather(b, a, settings.gather_ranks)
        finally:
            for server in (memory, a, b, c):
                await server.stop()
    return out
