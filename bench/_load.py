"""The load generator both servers face: closed-loop workers on keep-alive connections."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ._wire import Connection, Target, connect

__all__ = ["LoadResult", "closed_loop", "percentile"]


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` in 0..1); NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


@dataclass(frozen=True, slots=True)
class LoadResult:
    requests: int
    seconds: float
    latencies: list[float]
    statuses: dict[int, int]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies) if self.latencies else float("nan")

    @property
    def p99(self) -> float:
        return percentile(self.latencies, 0.99)


async def closed_loop(
    target: Target,
    request_for: Callable[[int], bytes],
    *,
    concurrency: int,
    seconds: float,
    warmup: float = 0.3,
) -> LoadResult:
    """``concurrency`` workers, each sending its next request when the last one is answered.

    Only replies that arrive between ``warmup`` and ``warmup + seconds`` count.
    """
    connections: list[Connection] = [await connect(target, keep_body=False) for _ in range(concurrency)]
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + seconds
    counter = 0

    async def worker(connection: Connection) -> None:
        nonlocal counter
        while True:
            now = time.perf_counter()
            if now >= stop_at:
                return
            counter += 1
            reply = await connection.request(request_for(counter))
            # Throughput counts completions inside the window, whenever they started.
            if measure_from <= reply.done_at <= stop_at:
                latencies.append(reply.done_at - reply.sent_at)
                statuses[reply.status] = statuses.get(reply.status, 0) + 1

    try:
        await asyncio.wait_for(
            asyncio.gather(*(worker(c) for c in connections)), timeout=warmup + seconds + 30
        )
    finally:
        for connection in connections:
            connection.close()
    return LoadResult(len(latencies), seconds, latencies, statuses)
