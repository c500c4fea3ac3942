"""Scenario 7 (issue 8): replicas over one Redis beside one process in memory, in one run.

A ``redis-server`` of its own (free port, temporary directory, AOF with
``appendfsync always``), three replicas of ``python -m aiobootstrap --store
redis://...`` and one in-memory server, all on loopback. Figures:

- a registration's own latency (PUT to its ``200``), Redis vs memory;
- one waiter parked on replica B woken by a registration through replica A,
  from A's ``200`` to B's first reply byte;
- 1,000 waiters spread over A and B, woken by one registration through C;
- GET and PUT throughput under ``wrk -t1 -c64`` (the Python generator when
  ``wrk`` is missing) through one replica, and through two at once (32
  connections each), vs the in-memory server, with each process's CPU per
  request (the replicas' and Redis's);
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
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

from ._data import registration, weights
from ._load import closed_loop
from ._scenarios import LONG_WAIT, REGISTER, Settings, _connect_many, _register, _summary, get_path
from ._servers import SERVERS, RunningServer, cpu_seconds
from ._wire import Target, connect, get_request, put_request
from ._wrk import find_wrk, run_wrk

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


class Measured(Protocol):
    """A server under load: where it listens, and the CPU its process has used."""

    @property
    def target(self) -> Target: ...

    def cpu_seconds(self) -> float: ...


_PUT_BODIES = [registration(2 + i, weights(4)) for i in range(1024)]


async def wrk_load(
    servers: Sequence[Measured], load: str, seconds: float, store_pid: int | None
) -> dict[str, float]:
    """``wrk -c64`` GETs of one rank or PUTs of 1,024 ranks, the connections shared out over ``servers`` at once.

    The rate is the servers' sum; CPU per request is all their processes'
    (and Redis's) user plus system time over the requests wrk counted.
    """
    connections = 64 // len(servers)
    cpu = [server.cpu_seconds() for server in servers]
    store_cpu = cpu_seconds(store_pid) if store_pid else 0.0
    bodies = _PUT_BODIES if load == "put_small" else None
    path = REGISTER if load == "put_small" else get_path(0)
    runs = await asyncio.gather(
        *(
            run_wrk(server.target, path, bodies, connections=connections, seconds=seconds)
            for server in servers
        )
    )
    requests = max(1, sum(run.requests for run in runs))
    errors = sum(sum(run.errors.values()) for run in runs)
    if errors:
        raise RuntimeError(f"{load}: {errors} requests failed under wrk")
    used = sum(server.cpu_seconds() - before for server, before in zip(servers, cpu, strict=True))
    return {
        "rps": sum(run.rate for run in runs),
        "server_us_per_request": used * 1e6 / requests,
        "store_us_per_request": (cpu_seconds(store_pid) - store_cpu) * 1e6 / requests if store_pid else 0.0,
    }


async def _generated_load(
    server: Measured, load: str, seconds: float, store_pid: int | None
) -> dict[str, float]:
    """As :func:`wrk_load`, with the Python load generator (no ``wrk`` installed)."""
    put_small = [put_request(REGISTER, body) for body in _PUT_BODIES]
    get_small = get_request(get_path(0))
    cpu = server.cpu_seconds()
    store_cpu = cpu_seconds(store_pid) if store_pid else 0.0
    result = await closed_loop(
        server.target,
        (lambda i: put_small[i % 1024]) if load == "put_small" else (lambda i: get_small),
        concurrency=64,
        seconds=seconds,
    )
    total = max(1, result.requests)
    return {
        "rps": result.rate,
        "server_us_per_request": (server.cpu_seconds() - cpu) * 1e6 / total,
        "store_us_per_request": (cpu_seconds(store_pid) - store_cpu) * 1e6 / total if store_pid else 0.0,
    }


async def _throughput(
    groups: dict[str, Sequence[Measured]],
    store_pids: Mapping[str, int | None],
    seconds: float,
    rounds: int,
    use_wrk: bool,
) -> dict[str, Any]:
    """Each load through each group of servers in turn, round after round: medians per group and load.

    ``store_pids``: the process of each group's store (its CPU counted per request); none for the
    in-memory server."""
    for servers in groups.values():
        for server in servers:
            await _register(server.target, 0, 4)
    runs: dict[str, dict[str, list[dict[str, float]]]] = {name: {} for name in groups}
    for _ in range(rounds):
        for load in ("get_small", "put_small"):
            for name, servers in groups.items():
                pid = store_pids.get(name)
                if use_wrk:
                    run = await wrk_load(servers, load, seconds, pid)
                else:
                    run = await _generated_load(servers[0], load, seconds, pid)
                runs[name].setdefault(load, []).append(run)
    out: dict[str, Any] = {
        name: {
            load: {figure: statistics.median(run[figure] for run in done) for figure in done[0]}
            for load, done in loads.items()
        }
        for name, loads in runs.items()
    }
    out["generator"] = "wrk -t1 -c64" if use_wrk else "python, c=64"
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
            rounds, seconds = settings.throughput_rounds, settings.throughput_seconds
            # Side by side, each load in turn on the same cores: one process, one replica, two at once.
            use_wrk = find_wrk() is not None and not settings.python_load
            groups: dict[str, Sequence[Measured]] = {"memory": [memory], "redis": [a]}
            if use_wrk:
                groups["redis_two"] = [a, b]
            pids = {"redis": redis_pid, "redis_two": redis_pid}  # the in-memory server has no store process
            out["throughput"] = await _throughput(groups, pids, seconds, rounds, use_wrk)
            out["gather"] = await _gather(b, a, settings.gather_ranks)
        finally:
            for server in (memory, a, b, c):
                await server.stop()
    return out
