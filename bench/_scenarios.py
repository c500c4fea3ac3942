"""The six scenarios of issue 3. Each starts its own servers and returns plain data."""

from __future__ import annotations

import asyncio
import gc
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from aiobootstrap.wire.routes import MAX_BATCH_RANKS

from ._data import registration, weights
from ._load import LoadResult, closed_loop, percentile
from ._servers import SERVERS, RunningServer
from ._wire import Connection, Reply, Target, connect, get_request, put_request
from ._wrk import find_wrk, run_wrk

__all__ = ["Settings", "big_payload", "broadcast", "codec", "gather", "hundred_k", "throughput", "wake"]

REGISTER = "/register_transfer_engine_info"
LONG_WAIT = 120


def get_path(rank: int, wait: float | None = None) -> str:
    path = f"/get_transfer_engine_info?rank={rank}"
    return path if wait is None else f"{path}&wait={wait:g}"


@dataclass(frozen=True, slots=True)
class Settings:
    """How big and how long; ``quick`` shrinks every scenario to a CI-sized run."""

    quick: bool
    wake_single_trials: int
    wake_crowds: tuple[int, ...]
    wake_crowd_trials: int
    throughput_seconds: float
    throughput_rounds: int
    codec_matrix: bool
    broadcast_waiters: int
    gather_ranks: int
    big_tensors: int
    big_getters: int
    big_reference_getters: int
    many_ranks: int
    many_connections: int
    python_load: bool = False
    """Use the Python load generator for the throughput scenarios even when wrk is installed."""

    @classmethod
    def full(cls, python_load: bool = False) -> Settings:
        return cls(
            False, 20, (100, 1000), 3, 1.5, 3, True, 4096, 4096, 340_000, 100, 4, 100_000, 256, python_load
        )

    @classmethod
    def quick_run(cls, python_load: bool = False) -> Settings:
        return cls(True, 5, (1000,), 1, 1.0, 1, False, 4096, 4096, 340_000, 20, 0, 10_000, 256, python_load)


async def _connect_many(target: Target, count: int, keep_body: bool = True) -> list[Connection]:
    # Batches, so 4,096 connects do not all sit in the server's accept queue at once.
    connections: list[Connection] = []
    for start in range(0, count, 256):
        batch = await asyncio.gather(*(connect(target, keep_body) for _ in range(min(256, count - start))))
        connections.extend(batch)
    return connections


async def _register(target: Target, rank: int, tensors: int = 4) -> Reply:
    connection = await connect(target)
    try:
        reply = await connection.request(put_request(REGISTER, registration(rank, weights(tensors))))
    finally:
        connection.close()
    if reply.status != 200:
        raise RuntimeError(f"registration of rank {rank} answered {reply.status}: {reply.body[:200]!r}")
    return reply


def _summary(latencies: list[float]) -> dict[str, float]:
    """Milliseconds: median, p99 and max."""
    return {
        "p50_ms": statistics.median(latencies) * 1e3,
        "p99_ms": percentile(latencies, 0.99) * 1e3,
        "max_ms": max(latencies) * 1e3,
        "n": len(latencies),
    }


# -- 1 and 3: waking parked getters --------------------------------------


async def _long_poll_crowd(
    server: RunningServer, rank: int, waiters: int
) -> tuple[list[float], list[int], dict[str, float], list[float]]:
    """``waiters`` lean long-polls on ``rank``; registration at a random moment once all are parked.

    Returns each waiter's delay from the registration being sent to its first
    reply byte, the requests each waiter sent, and the server's RSS (KiB)
    before and while parked, its CPU for the wake-up, and the delays from the
    registration's 200 (what earlier runs reported).
    """
    rss_before = server.rss()
    # The registering rank's connection is open (and answered once) before the clock
    # starts: the figure is the registration's, not a TCP accept's.
    registrar = await connect(server.target)
    await registrar.request(get_request("/health"))
    connections = await _connect_many(server.target, waiters)
    request = get_request(get_path(rank, LONG_WAIT))
    replies = [connection.send(request) for connection in connections]
    # The server is another process: give it time to read and park every request.
    await asyncio.sleep(0.05 + waiters * 0.0003)
    rss_parked = server.rss()
    await asyncio.sleep(random.uniform(0.0, 0.05))
    cpu_before = server.cpu_seconds()
    put = await registrar.request(put_request(REGISTER, registration(rank, weights(4))))
    registrar.close()
    if put.status != 200:
        raise RuntimeError(f"registration of rank {rank} answered {put.status}: {put.body[:200]!r}")
    done = await asyncio.gather(*replies)
    cpu_ms = (server.cpu_seconds() - cpu_before) * 1e3
    for connection in connections:
        connection.close()
    if any(reply.status != 200 for reply in done):
        raise RuntimeError(f"a waiter on rank {rank} was not answered 200")
    delays = [reply.first_byte_at - put.sent_at for reply in done]
    after_200 = [reply.first_byte_at - put.first_byte_at for reply in done]
    stats = {"before": rss_before, "parked": rss_parked, "cpu_ms": cpu_ms}
    return delays, [c.requests for c in connections], stats, after_200


async def _polling_crowds(
    server: RunningServer, ranks: list[int], pollers: int
) -> tuple[list[float], list[int]]:
    """The loop engines use: GET; on 404, ``sleep(1)``; retry. ``pollers`` per rank.

    Pollers start at random phases; each rank registers at a random moment 1-2 s in.
    """

    async def poll(connection: Connection, rank: int) -> Reply:
        await asyncio.sleep(random.uniform(0.0, 1.0))
        request = get_request(get_path(rank))
        while True:
            reply = await connection.request(request)
            if reply.status == 200:
                return reply
            await asyncio.sleep(1.0)

    async def register_later(rank: int) -> Reply:
        await asyncio.sleep(random.uniform(1.0, 2.0))
        return await _register(server.target, rank)

    delays: list[float] = []
    requests: list[int] = []
    connections = {rank: await _connect_many(server.target, pollers) for rank in ranks}
    polls = {rank: [asyncio.create_task(poll(c, rank)) for c in connections[rank]] for rank in ranks}
    registrations = {rank: asyncio.create_task(register_later(rank)) for rank in ranks}
    async with asyncio.timeout(30):
        for rank in ranks:
            put = await registrations[rank]
            for reply in await asyncio.gather(*polls[rank]):
                delays.append(reply.first_byte_at - put.sent_at)
            requests.extend(c.requests for c in connections[rank])
            for connection in connections[rank]:
                connection.close()
    return delays, requests


async def wake(settings: Settings) -> dict[str, Any]:
    """Scenario 1: K waiters on one rank, long-poll vs polling."""
    out: dict[str, Any] = {"long_poll": {}, "polling": {}}
    async with await RunningServer.start(SERVERS["aiobootstrap"]) as server:
        rank = 1000
        single: list[float] = []
        single_200: list[float] = []
        for _ in range(settings.wake_single_trials):
            delays, requests, stats, after_200 = await _long_poll_crowd(server, rank, 1)
            single.extend(delays)
            single_200.extend(after_200)
            rank += 1
        out["long_poll"][1] = _summary(single) | {
            "requests_per_waiter": 1.0,
            "after_200_p50_ms": statistics.median(single_200) * 1e3,
        }
        for crowd in settings.wake_crowds:
            pooled: list[float] = []
            pooled_200: list[float] = []
            sent: list[int] = []
            cpu: list[float] = []
            for _ in range(settings.wake_crowd_trials):
                delays, requests, stats, after_200 = await _long_poll_crowd(server, rank, crowd)
                pooled.extend(delays)
                pooled_200.extend(after_200)
                sent.extend(requests)
                cpu.append(stats["cpu_ms"])
                rank += 1
            out["long_poll"][crowd] = _summary(pooled) | {
                "requests_per_waiter": statistics.mean(sent),
                "server_cpu_ms": statistics.median(cpu),
                "after_200_p50_ms": statistics.median(pooled_200) * 1e3,
                "after_200_p99_ms": percentile(pooled_200, 0.99) * 1e3,
            }
        ranks = list(range(rank, rank + settings.wake_single_trials))
        delays, requests = await _polling_crowds(server, ranks, 1)
        rank += len(ranks)
        out["polling"][1] = _summary(delays) | {"requests_per_waiter": statistics.mean(requests)}
        for crowd in settings.wake_crowds:
            delays, requests = await _polling_crowds(server, [rank], crowd)
            rank += 1
            out["polling"][crowd] = _summary(delays) | {
                "requests_per_waiter": statistics.mean(requests),
                "max_requests": max(requests),
            }
    return out


async def broadcast(settings: Settings) -> dict[str, Any]:
    """Scenario 3: one registration answers thousands of parked waiters.

    Run on uvloop (as installed) and on the stdlib loop, to show what the loop buys.
    """
    out: dict[str, Any] = {"waiters": settings.broadcast_waiters}
    for name in ("aiobootstrap", "plain"):
        async with await RunningServer.start(SERVERS[name]) as server:
            await _register(server.target, 0)  # warm: the first registration builds caches
            pooled: list[float] = []
            lasts: list[float] = []
            memory: list[float] = []
            cpu: list[float] = []
            for trial in range(settings.wake_crowd_trials):
                delays, requests, rss, _ = await _long_poll_crowd(
                    server, 1 + trial, settings.broadcast_waiters
                )
                pooled.extend(delays)
                lasts.append(max(delays) * 1e3)
                cpu.append(rss["cpu_ms"])
                if trial == 0:  # later trials start with the first one's memory already in the heap
                    memory.append((rss["parked"] - rss["before"]) / settings.broadcast_waiters)
                    out.setdefault("rss_before_kib", rss["before"])
                    out.setdefault("rss_parked_kib", rss["parked"])
        out[name] = _summary(pooled) | {
            "last_ms_per_trial": lasts,
            "last_ms_median": statistics.median(lasts),
            "server_cpu_ms": statistics.median(cpu),
            "server_cpu_us_per_waiter": statistics.median(cpu) * 1e3 / settings.broadcast_waiters,
            "kib_per_waiter": memory[0],
            "requests_per_waiter": statistics.mean(requests),
        }
    return out


# -- 2: throughput ------------------------------------------------------


THROUGHPUT_LOADS = {
    # load: (path of a GET, or the tensors of each PUT body, and how many ranks the PUTs cycle over)
    "get_small": (get_path(0), 0, 0),
    "get_real": (get_path(1), 0, 0),
    "put_32": (REGISTER, 32, 1024),
    "put_real": (REGISTER, 1000, 64),
}
"""GET of a small (4 tensors) and a realistic (1,000 tensors, ~60 KB) info; PUT of 32 tensors and of 1,000."""


async def throughput(settings: Settings) -> dict[str, Any]:
    """Scenario 2: PUT and GET at concurrency 64, every server variant, one load generator.

    The generator is ``wrk`` when it is installed (C: the load costs the
    servers' cores little), the Python one (``_load``) otherwise.
    """
    wrk = None if settings.python_load else find_wrk()
    # Pre-encoded: the load generator must not spend its time in json.dumps.
    bodies = {
        load: [registration(2 + i, weights(tensors)) for i in range(ranks)]
        for load, (_, tensors, ranks) in THROUGHPUT_LOADS.items()
        if tensors
    }
    kinds = ["aiobootstrap", "reference"]
    if settings.codec_matrix:
        kinds += ["plain", "orjson", "uvloop"]
    out: dict[str, Any] = {
        "info_bytes": {
            name: len(json.dumps(weights(n))) for name, n in (("small", 4), ("32", 32), ("real", 1000))
        },
        "load_generator": wrk if wrk is not None else "python (bench/_load.py)",
    }
    servers = {name: await RunningServer.start(SERVERS[name]) for name in kinds}
    samples: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        for server in servers.values():
            await _register(server.target, 0, 4)
            await _register(server.target, 1, 1000)
        # Rounds that take turns between the servers: a burst of other work on
        # this shared machine then hurts every server a little, not one a lot.
        for _ in range(settings.throughput_rounds):
            for load, (path, _, _) in THROUGHPUT_LOADS.items():
                for name, server in servers.items():
                    result = await _load(server.target, path, bodies.get(load), settings, wrk is not None)
                    samples.setdefault((name, load), []).append(result)
    finally:
        for server in servers.values():
            await server.stop()
    for (name, load), results in samples.items():
        out.setdefault(name, {})[load] = {
            "rps": statistics.median(r["rps"] for r in results),
            "rps_per_round": [r["rps"] for r in results],
            "p50_ms": statistics.median(r["p50_ms"] for r in results),
            "p99_ms": statistics.median(r["p99_ms"] for r in results),
            "errors": sum(r["errors"] for r in results),
        }
    return out


async def _load(
    target: Target, path: str, bodies: list[bytes] | None, settings: Settings, use_wrk: bool
) -> dict[str, Any]:
    """One round of one load on one server: requests/s, p50 and p99 (ms), replies that were not 200."""
    if use_wrk:
        # wrk has no warm-up: the round runs that much longer instead.
        ran = await run_wrk(target, path, bodies, seconds=settings.throughput_seconds + 0.3)
        rate, p50, p99, errors = ran.rate, ran.p50, ran.p99, sum(ran.errors.values())
    else:
        requests = [get_request(path)] if bodies is None else [put_request(path, body) for body in bodies]
        result: LoadResult = await closed_loop(
            target,
            lambda i: requests[i % len(requests)],
            concurrency=64,
            seconds=settings.throughput_seconds,
        )
        rate, p50, p99 = result.rate, result.p50, result.p99
        errors = sum(count for status, count in result.statuses.items() if status != 200)
    return {"rps": rate, "p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3, "errors": errors}


# -- 4 and 6: gathers ---------------------------------------------------


async def _register_all(target: Target, bodies: list[bytes], connections: int) -> list[Reply]:
    """Send every registration over ``connections`` keep-alive connections at once."""
    pool = await _connect_many(target, connections)
    queue = iter(range(len(bodies)))
    replies: list[Reply] = []

    async def worker(connection: Connection) -> None:
        for index in queue:
            reply = await connection.request(put_request(REGISTER, bodies[index]))
            if reply.status != 200:
                raise RuntimeError(f"a registration answered {reply.status}: {reply.body[:200]!r}")
            replies.append(reply)

    try:
        await asyncio.gather(*(worker(c) for c in pool))
    finally:
        for connection in pool:
            connection.close()
    return replies


async def _batch_gather(server: RunningServer, bodies: list[bytes], connections: int) -> dict[str, Any]:
    consumer = await connect(server.target)
    ranks = len(bodies)
    reply_future = consumer.send(
        get_request(f"/get_transfer_engine_info_batch?ranks=0-{ranks - 1}&wait={LONG_WAIT}")
    )
    await asyncio.sleep(0.1)
    started = time.perf_counter()
    puts = await _register_all(server.target, bodies, connections)
    reply = await reply_future
    consumer.close()
    if reply.status != 200:
        raise RuntimeError(f"the gather answered {reply.status}")
    last_put = max(put.first_byte_at for put in puts)
    parse_started = time.perf_counter()
    parsed = json.loads(reply.body)
    parse_seconds = time.perf_counter() - parse_started
    if len(parsed["infos"]) != ranks:
        raise RuntimeError("the gather reply lacks ranks")
    return {
        "ranks": ranks,
        "register_seconds": last_put - started,
        "registrations_per_s": ranks / (last_put - started),
        "after_last_registration_s": reply.done_at - last_put,
        "first_byte_after_last_registration_s": reply.first_byte_at - last_put,
        "reply_bytes": reply.length,
        "client_parse_s": parse_seconds,
        "requests": consumer.requests,
    }


async def _polling_gather(server: RunningServer, bodies: list[bytes], connections: int) -> dict[str, Any]:
    """One consumer fetches rank after rank, with the GET / 404 / sleep(1) loop."""
    consumer = await connect(server.target)

    async def consume() -> float:
        for rank in range(len(bodies)):
            while True:
                reply = await consumer.request(get_request(get_path(rank)))
                if reply.status == 200:
                    break
                await asyncio.sleep(1.0)
        return time.perf_counter()

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.1)
    puts = await _register_all(server.target, bodies, connections)
    async with asyncio.timeout(600):
        done_at = await task
    consumer.close()
    return {
        "after_last_registration_s": done_at - max(put.first_byte_at for put in puts),
        "requests": consumer.requests,
    }


async def gather(settings: Settings) -> dict[str, Any]:
    """Scenario 4: thousands of ~3 KB registrations, one consumer, one batch call."""
    info = weights(50)
    bodies = [registration(rank, info) for rank in range(settings.gather_ranks)]
    out: dict[str, Any] = {"info_bytes": len(json.dumps(info))}
    async with await RunningServer.start(SERVERS["aiobootstrap"]) as server:
        out["batch"] = await _batch_gather(server, bodies, 256)
    async with await RunningServer.start(SERVERS["aiobootstrap"]) as server:
        out["polling"] = await _polling_gather(server, bodies, 256)
    return out


async def hundred_k(settings: Settings) -> dict[str, Any]:
    """Scenario 6: many small registrations over a few hundred connections, then one gather."""
    info = weights(2)
    bodies = [registration(rank, info) for rank in range(settings.many_ranks)]
    # As a deployment would run it: its world size declared, which also lifts the
    # cap on distinct ranks a server without one keeps (--max-ranks, 65,536).
    world = ("--world-size", str(settings.many_ranks))
    async with await RunningServer.start(SERVERS["aiobootstrap"], *world) as server:
        rss_start = server.rss()
        started = time.perf_counter()
        await _register_all(server.target, bodies, settings.many_connections)
        registered = time.perf_counter()
        rss_registered = server.rss()
        consumer = await connect(server.target)
        # A batch names at most MAX_BATCH_RANKS ranks (a larger one is a 400): one
        # request per 65,536 ranks, back to back on one connection, as the client does.
        reply_bytes = 0
        for first in range(0, settings.many_ranks, MAX_BATCH_RANKS):
            last = min(first + MAX_BATCH_RANKS, settings.many_ranks) - 1
            reply = await consumer.request(
                get_request(f"/get_transfer_engine_info_batch?ranks={first}-{last}")
            )
            if reply.status != 200:
                raise RuntimeError(f"the gather answered {reply.status}")
            reply_bytes += reply.length
        consumer.close()
        done = time.perf_counter()
        peak = server.peak_rss()
    return {
        "ranks": settings.many_ranks,
        "connections": settings.many_connections,
        "register_s": registered - started,
        "registrations_per_s": settings.many_ranks / (registered - started),
        "gather_s": done - registered,
        "total_s": done - started,
        "reply_bytes": reply_bytes,
        "rss_start_kib": rss_start,
        "rss_registered_kib": rss_registered,
        "peak_rss_kib": peak,
    }


# -- 5: one big payload -------------------------------------------------


async def big_payload(settings: Settings) -> dict[str, Any]:
    """Scenario 5: a 20 MB weights_info_dict, registered once, fetched by many at once."""
    body = registration(0, weights(settings.big_tensors))
    out: dict[str, Any] = {"body_bytes": len(body)}
    # The reference re-encodes the whole dict for every get (seconds each): few getters.
    runs = [("aiobootstrap", settings.big_getters), ("reference", settings.big_reference_getters)]
    for name, getters in runs:
        if not getters:
            continue
        async with await RunningServer.start(SERVERS[name]) as server:
            rss_start = server.rss()
            connection = await connect(server.target)
            put = await connection.request(put_request(REGISTER, body))
            connection.close()
            if put.status != 200:
                raise RuntimeError(f"{name} refused the big registration: {put.status}")
            rss_registered = server.rss()
            pool = await _connect_many(server.target, getters, keep_body=False)
            started = time.perf_counter()
            async with asyncio.timeout(300):
                replies = await asyncio.gather(*(c.request(get_request(get_path(0))) for c in pool))
            finished = time.perf_counter()
            for c in pool:
                c.close()
            if any(reply.status != 200 for reply in replies):
                raise RuntimeError(f"{name} failed a big get")
            out[name] = {
                "getters": getters,
                "register_s": put.done_at - put.sent_at,
                "all_fetched_s": finished - started,
                "per_get_s": (finished - started) / getters,
                "reply_bytes": replies[0].length,
                "rss_start_kib": rss_start,
                "rss_registered_kib": rss_registered,
                "peak_rss_kib": server.peak_rss(),
            }
    return out


# -- the codec, in process ----------------------------------------------


async def codec(settings: Settings) -> dict[str, Any]:
    """What orjson buys over the stdlib for a registration's parse and its reply's encoding."""
    from aiobootstrap import _json

    switch = "orjson"  # the module attribute the codec reads; None means "not installed"
    fast_module = getattr(_json, switch)
    out: dict[str, Any] = {}
    for label, tensors in (("3 KB", 50), ("60 KB", 1000), ("21 MB", settings.big_tensors)):
        body = registration(0, weights(tensors))
        value = json.loads(body)
        repeats = max(3, min(1000, 1_000_000 // len(body)))
        timings: dict[str, float] = {}
        for name, module in (("orjson", fast_module), ("stdlib", None)):
            setattr(_json, switch, module)
            try:
                timings[f"loads_{name}_ms"] = _median_ms(partial(_json.loads, body), repeats)
                timings[f"dumps_{name}_ms"] = _median_ms(partial(_json.dumps, value), repeats)
            finally:
                setattr(_json, switch, fast_module)
        out[label] = {"bytes": len(body), **timings}
        await asyncio.sleep(0)
    return out


def _median_ms(action: Callable[[], object], repeats: int) -> float:
    # As timeit does: a collection in the middle would time the heap, not the codec.
    gc.collect()
    gc.disable()
    try:
        samples = []
        for _ in range(repeats):
            started = time.perf_counter()
            action()
            samples.append(time.perf_counter() - started)
    finally:
        gc.enable()
    return statistics.median(samples) * 1e3
