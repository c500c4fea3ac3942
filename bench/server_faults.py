"""The server under faults, side by side on two source trees: memory, /health beside a scrape, log bytes.

``python -m bench.server_faults --before /tmp/before18`` (a checkout of an older
commit: ``git archive c4bc7f6 aiobootstrap | tar -x -C /tmp/before18``)
runs each scenario on a server from this tree and one from ``--before``, on
loopback, and prints one Markdown row per scenario and tree:

- ``scrape``: a Redis registry of ``--ranks`` ranks of 90 KiB; one
  ``/metrics`` scrape's time and the longest ``/health`` meanwhile;
- ``object``: ``--waiters`` gets with ``form=object`` parked on one rank,
  woken by a 4 MiB registration: the server's peak RSS growth;
- ``churn``: PUT then DELETE in ``--namespaces`` new namespaces: RSS growth;
- ``roles``: ``--roles`` distinct roles at ``--world-size 1``: how many were
  stored, and RSS growth;
- ``log``: two registrations with a 4 MiB ``session_id``: log bytes written.

It starts its own redis-server on a free port (never 6379).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import aiohttp

from ._servers import rss_kib

INFO = {"session_id": "s", "weights_info_dict": {}}
SCENARIOS = ("scrape", "object", "churn", "roles", "log")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def _redis() -> AsyncIterator[str]:
    port, directory = _free_port(), tempfile.mkdtemp()
    argv = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", directory]
    process = await asyncio.create_subprocess_exec(
        shutil.which("redis-server") or "redis-server", *argv, stdout=asyncio.subprocess.DEVNULL
    )
    try:
        for _ in range(500):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            await asyncio.sleep(0.01)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.kill()
        await process.wait()
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.asynccontextmanager
async def _server(tree: str | None, *options: str, log: Path | None = None) -> AsyncIterator[tuple[str, int]]:
    """A server from ``tree`` (run there: ``-m`` puts the working directory first), or from this one."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    stderr = open(log, "wb") if log is not None else asyncio.subprocess.DEVNULL  # noqa: SIM115, ASYNC230
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiobootstrap", "--port", "0", *options,
        stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env, cwd=tree,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        while not (line := (await process.stdout.readline()).decode()).startswith(
            "aiobootstrap listening on "
        ):
            if not line:
                raise RuntimeError("the server exited before listening")
        yield line.split(" on ", 1)[1].strip(), process.pid
    finally:
        process.terminate()
        await process.wait()
        if log is not None:
            stderr.close()  # type: ignore[union-attr]


def _rss(pid: int, field: str = "VmRSS") -> float:
    return rss_kib(pid)[field] / 1024


async def scrape(tree: str | None, ranks: int) -> str:
    async with (
        _redis() as redis,
        _server(tree, "--store", redis) as (url, _),
        aiohttp.ClientSession() as http,
    ):
        weights = {"w": "x" * 90 * 1024}
        for rank in range(ranks):
            body = {"rank": rank, "transfer_engine_info": {"session_id": "s", "weights_info_dict": weights}}
            async with http.put(f"{url}/register_transfer_engine_info", json=body) as reply:
                assert reply.status == 200
        worst, done = 0.0, asyncio.Event()

        async def probe() -> None:
            nonlocal worst
            while not done.is_set():
                started = time.perf_counter()
                async with http.get(f"{url}/health") as reply:
                    await reply.read()
                worst = max(worst, time.perf_counter() - started)
                await asyncio.sleep(0.005)

        prober = asyncio.create_task(probe())
        started = time.perf_counter()
        async with http.get(f"{url}/metrics") as reply:
            await reply.read()
        took = time.perf_counter() - started
        done.set()
        await prober
        return f"scrape of {ranks} ranks of 90 KiB (Redis) | {took:.2f} s | longest /health {worst * 1000:.0f} ms"


async def woken_objects(tree: str | None, waiters: int) -> str:
    unlimited = aiohttp.TCPConnector(limit=0)  # a connection per wait, and one more for the PUT
    async with _server(tree) as (url, pid), aiohttp.ClientSession(connector=unlimited) as http:
        before = _rss(pid)
        params = {"rank": "0", "form": "object", "wait": "60"}

        async def get() -> int:
            async with http.get(f"{url}/get_transfer_engine_info", params=params) as reply:
                await reply.read()
                return reply.status

        gets = [asyncio.create_task(get()) for _ in range(waiters)]
        await asyncio.sleep(2.0)  # a bench, not a test: let the crowd park
        body = {
            "rank": 0,
            "transfer_engine_info": {"session_id": "s", "weights_info_dict": {"w": "x" * (4 << 20)}},
        }
        async with http.put(f"{url}/register_transfer_engine_info", json=body) as reply:
            assert reply.status == 200
        statuses = await asyncio.gather(*gets)
        assert statuses == [200] * waiters
        peak = _rss(pid, "VmHWM") - before
        return f"{waiters} form=object waits woken by a 4 MiB record | peak RSS +{peak:.0f} MiB | now +{_rss(pid) - before:.0f} MiB"


async def churn(tree: str | None, namespaces: int) -> str:
    async with _server(tree) as (url, pid), aiohttp.ClientSession() as http:
        before = _rss(pid)
        for number in range(namespaces):
            path = f"{url}/ns/n{number}/register_transfer_engine_info"
            async with http.put(path, json={"rank": 0, "transfer_engine_info": INFO}) as reply:
                assert reply.status == 200
            async with http.delete(path, params={"rank": "0"}) as reply:
                assert reply.status == 200
        return f"PUT + DELETE in {namespaces} new namespaces | RSS +{_rss(pid) - before:.1f} MiB"


async def roles(tree: str | None, count: int) -> str:
    async with _server(tree, "--world-size", "1") as (url, pid), aiohttp.ClientSession() as http:
        before, stored = _rss(pid), 0
        for number in range(count):
            body = {"rank": 0, "role": f"role-{number}", "transfer_engine_info": INFO}
            async with http.put(f"{url}/register_transfer_engine_info", json=body) as reply:
                stored += reply.status == 200
        return f"{count} distinct roles, --world-size 1 | {stored} stored | RSS +{_rss(pid) - before:.1f} MiB"


async def log_bytes(tree: str | None) -> str:
    with tempfile.TemporaryDirectory() as directory:
        log = Path(directory) / "server.log"
        async with (
            _server(tree, "--log-format", "json", log=log) as (url, _),
            aiohttp.ClientSession() as http,
        ):
            info = {"session_id": "s" * (4 << 20), "weights_info_dict": {}}
            for rank in range(2):
                async with http.put(
                    f"{url}/register_transfer_engine_info", json={"rank": rank, "transfer_engine_info": info}
                ) as reply:
                    assert reply.status == 200
        return (
            f"2 registrations with a 4 MiB session_id, JSON log | {log.stat().st_size / 1024:.1f} KiB of log"
        )


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.server_faults", description=__doc__.split("\n")[0])
    parser.add_argument("--before", default=None, help="a source tree (with aiobootstrap/) to compare")
    parser.add_argument("--ranks", type=int, default=2000)
    parser.add_argument("--waiters", type=int, default=200)
    parser.add_argument("--namespaces", type=int, default=5000)
    parser.add_argument("--roles", type=int, default=5000)
    parser.add_argument("--only", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    args = parser.parse_args(argv)
    trees = {"after": None, **({"before": args.before} if args.before else {})}
    print("| tree | scenario | figure | |\n|---|---|---|---|")
    runs: dict[str, Callable[[str | None], Awaitable[str]]] = {
        "scrape": lambda tree: scrape(tree, args.ranks),
        "object": lambda tree: woken_objects(tree, args.waiters),
        "churn": lambda tree: churn(tree, args.namespaces),
        "roles": lambda tree: roles(tree, args.roles),
        "log": log_bytes,
    }
    for run in (runs[name] for name in args.only):
        for name, tree in trees.items():
            print(f"| {name} | {await run(tree)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
