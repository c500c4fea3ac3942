"""Leases and watch, side by side: keepalive cost, death seen, watch fan-out, RSS per lease.

    python -m bench.leases [--leases 10000] [--seconds 10] [--watchers 1000] [--trials 100] [--redis]

Starts one server (``python -m aiobootstrap``, memory store; ``--redis``:
over a redis-server of its own on a free loopback port) and measures, each
figure beside the one it is judged against in the same run:

- **keepalive cost**: ``--leases`` leases, one record each, kept alive at
  a third of a 10 s TTL (granted with 60 s, so that making them all never
  outlasts the first; a keepalive costs the same whatever the TTL) (``--leases / 3.33`` keepalives a second,
  spread over 64 connections) for ``--seconds``; the server's CPU per
  keepalive from ``/proc/PID/task/*/schedstat`` (nanoseconds), then a small
  GET at the same rate and its CPU per request; and the load's share of one
  core.
- **RSS per lease**: the server's RSS before the leases and their records
  were made and after, per lease (record included); over Redis, Redis'
  ``used_memory`` too (the lease's keys and the record).
- **death seen**: ``--trials`` leases of 1 s (the shortest the route takes),
  each with a record and a ``/watch`` long-poll filtered to its rank, spread
  over four seconds; from the lease's deadline (the grant sent + TTL: an
  upper bound, the grant's round trip counted in) to the watcher's first byte
  of the deletion, p50/p99; and from a ``DELETE /leases/ID`` sent to the
  watcher's first byte.
- **watch fan-out**: ``--watchers`` long-poll watchers told of one
  registration, as many ``Accept: text/event-stream`` watchers (each stream
  open and past its first comment line), and as many ``get(..., wait)``
  waiters on one rank, from the registration sent to each first byte,
  p50/p99, taking turns; each crowd's ratio to the waiters'.

``--only fan-out`` (or ``keepalive``, ``death``; repeatable) runs just those parts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiobootstrap.cli.main import loop_factory
from aiobootstrap.server.open_files import raise_open_file_limit

from ._data import registration, weights
from ._load import percentile
from ._scenarios import REGISTER, _connect_many, get_path
from ._servers import SERVERS, RunningServer
from ._wire import Connection, connect, get_request, put_request
from .store_redis import _start_redis

TTL = 10.0
"""The TTL the keepalive rate is set by: a third of it between two keepalives of a lease."""
SETUP_TTL = 60.0
"""The TTL the leases are granted with, so that making 10,000 never outlasts the first (a keepalive costs the same)."""
CONNECTIONS = 64
PARTS = ("keepalive", "death", "fan-out")
PLAIN = 1000
"""Records on no lease, read by the small GETs."""


def _post(path: str, body: bytes = b"") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _delete(path: str) -> bytes:
    return f"DELETE {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()


def _on_lease(rank: int, lease: str) -> bytes:
    body = json.loads(registration(rank, weights(1)))
    body["lease"] = lease
    return json.dumps(body, separators=(",", ":")).encode()


def cpu_ns(pid: int) -> int:
    """The CPU process ``pid`` has used, every thread, in nanoseconds (``schedstat``, not 10 ms ticks)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/task/{task}/schedstat") as stat:
            total += int(stat.read().split()[0])
    return total


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 0.5) * 1e3, "p99": percentile(values, 0.99) * 1e3}


async def _grant(connection: Connection, ttl: float) -> tuple[str, float]:
    """A new lease, and when its grant was sent: the deadline is at most that + ``ttl``.

    So a delay measured from there counts the grant's own round trip in: an
    upper bound (the reply's arrival would be a lower one, by as much).
    """
    reply = await connection.request(_post("/leases", json.dumps({"ttl": ttl}).encode()))
    if reply.status != 200:
        raise RuntimeError(f"a grant answered {reply.status}: {reply.body[:200]!r}")
    return json.loads(reply.body)["lease"], reply.sent_at


async def _version(connection: Connection) -> int:
    reply = await connection.request(get_request("/watch?after=0&wait=0&kind=parallelism_config"))
    return int(json.loads(reply.body)["version"])


# -- keepalive cost and RSS per lease ---------------------------------------------


async def _paced(connections: list[Connection], requests: list[bytes], rate: float, seconds: float) -> int:
    """Send ``requests`` round-robin at ``rate`` a second for ``seconds``; how many were answered."""
    queue = iter(requests * (int(rate * seconds) // max(1, len(requests)) + 1))
    started = time.perf_counter()
    done = 0

    async def worker(index: int, connection: Connection) -> None:
        nonlocal done
        sent = index
        while True:
            due = started + sent / rate
            if due - started >= seconds:
                return
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            reply = await connection.request(next(queue))
            if reply.status != 200:
                raise RuntimeError(f"answered {reply.status}: {reply.body[:200]!r}")
            done += 1
            sent += len(connections)

    await asyncio.gather(*(worker(index, c) for index, c in enumerate(connections)))
    return done


async def _revoke_all(connection: Connection, leases: list[str]) -> None:
    for lease in leases:
        await connection.request(_delete(f"/leases/{lease}"))


def _redis_memory(url: str | None) -> int:
    """Bytes Redis holds (``used_memory``); 0 without Redis."""
    if url is None:
        return 0
    import redis

    with redis.Redis.from_url(url) as client:
        return int(client.info("memory")["used_memory"])


async def keepalive_cost(
    server: RunningServer, leases: int, seconds: float, redis_url: str | None
) -> dict[str, float]:
    connections = await _connect_many(server.target, CONNECTIONS)
    rss_before, redis_before = server.rss(), _redis_memory(redis_url)
    ids: list[str] = []

    async def make(connection: Connection, ranks: range) -> None:
        for rank in ranks:
            lease, _ = await _grant(connection, SETUP_TTL)
            reply = await connection.request(put_request(REGISTER, _on_lease(rank, lease)))
            if reply.status != 200:
                raise RuntimeError(f"a leased register answered {reply.status}: {reply.body[:200]!r}")
            ids.append(lease)

    await asyncio.gather(*(make(c, range(i, leases, CONNECTIONS)) for i, c in enumerate(connections)))
    rss_after, redis_after = server.rss(), _redis_memory(redis_url)
    rate = leases / (TTL / 3)
    keepalives = [_post(f"/leases/{lease}/keepalive") for lease in ids]
    before = cpu_ns(server.pid)
    done = await _paced(connections, keepalives, rate, seconds)
    keep_cpu = cpu_ns(server.pid) - before
    # Revoked, so that no storm of 10,000 expiries runs beside the figures that follow.
    await asyncio.gather(*(_revoke_all(c, ids[i :: len(connections)]) for i, c in enumerate(connections)))
    # The GETs read records on no lease (the leases run out once nobody keeps them alive).
    plain = range(leases, leases + PLAIN)
    for rank in plain:
        await connections[0].request(put_request(REGISTER, registration(rank, weights(1))))
    gets = [get_request(get_path(rank)) for rank in plain]
    before = cpu_ns(server.pid)
    got = await _paced(connections, gets, rate, seconds)
    get_cpu = cpu_ns(server.pid) - before
    for connection in connections:
        connection.close()
    return {
        "leases": leases,
        "rate": rate,
        "keepalive_us": keep_cpu / done / 1e3,
        "get_us": get_cpu / got / 1e3,
        "core_share": keep_cpu / 1e9 / seconds,
        "rss_per_lease_b": (rss_after - rss_before) * 1024 / leases,
        "redis_per_lease_b": (redis_after - redis_before) / leases,
    }


# -- death seen ------------------------------------------------------------------------


async def _one_death(server: RunningServer, rank: int, revoke: bool) -> float:
    """One lease with one record and a watcher of its rank: deadline (or revoke sent) to first byte."""
    await asyncio.sleep(random.uniform(0.0, 4.0))  # the trials spread over four seconds
    registrar = await connect(server.target)
    lease, granted = await _grant(registrar, 1.0)
    await registrar.request(put_request(REGISTER, _on_lease(rank, lease)))
    watcher = await connect(server.target)
    path = f"/watch?after={await _version(registrar)}&wait=30&kind=transfer_engine_info&ranks={rank}"
    reply = watcher.send(get_request(path))
    await asyncio.sleep(0.05)  # another process: let it read and park the watch
    if revoke:
        sent = time.perf_counter()
        await registrar.request(_delete(f"/leases/{lease}"))
        seen = (await reply).first_byte_at - sent
    else:
        seen = (await reply).first_byte_at - (granted + 1.0)
    registrar.close()
    watcher.close()
    return seen


async def death_seen(server: RunningServer, trials: int, first_rank: int) -> dict[str, dict[str, float]]:
    """Half the trials expire, half are revoked, all at once (each its own rank and connections)."""
    seen = await asyncio.gather(
        *(_one_death(server, first_rank + trial, trial % 2 == 1) for trial in range(trials))
    )
    return {"expiry": _ms(list(seen[0::2])), "revoke": _ms(list(seen[1::2]))}


# -- watch fan-out -----------------------------------------------------------------------


async def _crowd(server: RunningServer, rank: int, count: int, watch: bool) -> list[float]:
    registrar = await connect(server.target)
    after = await _version(registrar)
    connections = await _connect_many(server.target, count)
    path = f"/watch?after={after}&wait=60" if watch else get_path(rank, 60)
    replies = [c.send(get_request(path)) for c in connections]
    await asyncio.sleep(0.05 + count * 0.0003)  # another process: let it read and park every request
    put = await registrar.request(put_request(REGISTER, registration(rank, weights(4))))
    done = await asyncio.gather(*replies)
    for connection in [registrar, *connections]:
        connection.close()
    return [reply.first_byte_at - put.sent_at for reply in done]


class _Stream(asyncio.Protocol):
    """One SSE watcher: ``ready`` once its stream is up (a comment line seen), then when the next bytes came."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.first: asyncio.Future[float] = loop.create_future()
        self._seen = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.ready.done():
            if not self.first.done():
                self.first.set_result(time.perf_counter())
            return
        self._seen += data
        if b": ping\n\n" in self._seen:
            self.ready.set_result(None)


async def _stream_crowd(server: RunningServer, rank: int, count: int) -> list[float]:
    registrar = await connect(server.target)
    after = await _version(registrar)
    loop = asyncio.get_running_loop()
    request = (
        f"GET /watch?after={after} HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    streams: list[_Stream] = []
    for start in range(0, count, 256):
        made = await asyncio.gather(
            *(
                loop.create_connection(_Stream, server.target.host, server.target.port)
                for _ in range(min(256, count - start))
            )
        )
        streams.extend(protocol for _, protocol in made)
    for stream in streams:
        assert stream.transport is not None
        stream.transport.write(request)
    await asyncio.gather(*(stream.ready for stream in streams))
    await asyncio.sleep(0.05)  # another process: let every stream's task park again after its first write
    put = await registrar.request(put_request(REGISTER, registration(rank, weights(4))))
    firsts = await asyncio.gather(*(stream.first for stream in streams))
    registrar.close()
    for stream in streams:
        assert stream.transport is not None
        stream.transport.close()
    return [first - put.sent_at for first in firsts]


async def parked_memory(server: RunningServer, count: int, rank: int) -> dict[str, float]:
    """Bytes of server RSS per parked long-poll watcher and per parked waiter, each crowd held while the
    other parks (so neither reuses memory the other freed), then both answered by one registration."""
    registrar = await connect(server.target)
    after = await _version(registrar)
    grown: dict[str, float] = {}
    held: list[Connection] = []
    replies = []
    for name, path in (("watcher", f"/watch?after={after}&wait=60"), ("waiter", get_path(rank, 60))):
        before = server.rss()
        connections = await _connect_many(server.target, count)
        replies += [c.send(get_request(path)) for c in connections]
        await asyncio.sleep(0.05 + count * 0.0003)  # another process: let it read and park every request
        grown[f"per_{name}_b"] = (server.rss() - before) * 1024 / count
        held += connections
    await registrar.request(put_request(REGISTER, registration(rank, weights(4))))
    await asyncio.gather(*replies)
    for connection in [registrar, *held]:
        connection.close()
    return grown


async def fan_out(
    server: RunningServer, count: int, rounds: int, first_rank: int
) -> dict[str, dict[str, float]]:
    watchers: list[float] = []
    streams: list[float] = []
    waiters: list[float] = []
    for round_ in range(rounds):
        watchers += await _crowd(server, first_rank + 3 * round_, count, watch=True)
        streams += await _stream_crowd(server, first_rank + 3 * round_ + 1, count)
        waiters += await _crowd(server, first_rank + 3 * round_ + 2, count, watch=False)
    return {"watchers": _ms(watchers), "streams": _ms(streams), "waiters": _ms(waiters)}


# -- the run -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _redis() -> Iterator[str]:
    """A redis-server of its own (AOF, ``appendfsync always``) on a free port, killed at the end."""
    with tempfile.TemporaryDirectory() as directory:
        process, url = _start_redis(Path(directory))
        try:
            yield url
        finally:
            process.kill()
            process.wait()


async def run(args: argparse.Namespace, store: list[str]) -> dict[str, Any]:
    async with await RunningServer.start(SERVERS["aiobootstrap"], *store, "--max-wait", "300") as server:
        results: dict[str, Any] = {"store": "redis" if store else "memory"}
        redis_url = store[1] if store else None
        parts = set(args.only or PARTS)
        if "fan-out" in parts:  # first, on a fresh server: RSS grows only past memory freed before
            memory = await parked_memory(
                server, args.watchers, args.leases + PLAIN + args.trials + 3 * args.rounds
            )
        if "keepalive" in parts:
            results["keepalive"] = await keepalive_cost(server, args.leases, args.seconds, redis_url)
        if "death" in parts:
            results["death"] = await death_seen(server, args.trials, args.leases + PLAIN)
        if "fan-out" in parts:
            results["fan_out"] = await fan_out(
                server, args.watchers, args.rounds, args.leases + PLAIN + args.trials
            )
            results["fan_out"]["memory"] = memory
    return results


def _fan_lines(fan: dict[str, dict[str, float]]) -> list[str]:
    waiters = fan["waiters"]
    lines = [
        f"  fan-out, registration sent -> first byte: waiters on one rank p50 {waiters['p50']:.1f} ms, "
        f"p99 {waiters['p99']:.1f} ms"
    ]
    for name, label in (("watchers", "long-poll watchers"), ("streams", "SSE watchers")):
        crowd = fan[name]
        lines.append(
            f"    {label}: p50 {crowd['p50']:.1f} ms ({crowd['p50'] / waiters['p50']:.2f}x), "
            f"p99 {crowd['p99']:.1f} ms ({crowd['p99'] / waiters['p99']:.2f}x)"
        )
    memory = fan["memory"]
    lines.append(
        f"    RSS per parked long-poll watcher {memory['per_watcher_b']:.0f} B, "
        f"per parked waiter {memory['per_waiter_b']:.0f} B (connections included)"
    )
    return lines


def report(results: dict[str, Any]) -> str:
    lines = [f"leases over the {results['store']} store"]
    if "keepalive" in results:
        lines += _keep_lines(results["keepalive"], results["store"])
    if "death" in results:
        death = results["death"]
        lines.append(
            f"  death seen (deadline -> watcher's first byte): p50 {death['expiry']['p50']:.1f} ms, "
            f"p99 {death['expiry']['p99']:.1f} ms; revoke sent -> first byte: p50 {death['revoke']['p50']:.1f} ms, "
            f"p99 {death['revoke']['p99']:.1f} ms"
        )
    if "fan_out" in results:
        lines += _fan_lines(results["fan_out"])
    return "\n".join(lines)


def _keep_lines(keep: dict[str, float], store: str) -> list[str]:
    return [
        f"  keepalive: {keep['leases']} leases at {keep['rate']:.0f}/s: {keep['keepalive_us']:.0f} us CPU "
        f"per keepalive vs {keep['get_us']:.0f} us per small GET; {keep['core_share']:.0%} of one core",
        f"  RSS per lease (one record): {keep['rss_per_lease_b']:.0f} B"
        + (f"; Redis memory per lease: {keep['redis_per_lease_b']:.0f} B" if store == "redis" else ""),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.leases", description=__doc__.split("\n")[0])
    parser.add_argument("--leases", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis", action="store_true", help="also over a redis-server of its own")
    parser.add_argument("--only", action="append", choices=PARTS, help="run only this part (repeatable)")
    args = parser.parse_args()
    raise_open_file_limit()
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        print(report(runner.run(run(args, []))), flush=True)
        if args.redis:
            with _redis() as url:
                print(report(runner.run(run(args, ["--store", url]))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
