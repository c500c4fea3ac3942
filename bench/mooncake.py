"""Mooncake's metadata protocol, side by side with Mooncake's own server (``mooncake.http_metadata_server``,
from the same wheel the engines come in), in one run.

- ``GET`` and ``PUT`` of a 2 KB segment descriptor under ``wrk -t1 -c64``, 3 s each: aiobootstrap on the
  memory store, the file store and Redis (a ``redis-server`` of its own), against Mooncake's server;
- a real transfer engine's ``initialize`` and its first write to a peer (the peer's lookup) through each
  (``tests/helpers/mooncake_engine.py`` in processes of their own), the median of 5.

``python -m bench.mooncake`` (needs ``wrk``, ``redis-server`` and the ``mooncake-transfer-engine-non-cuda``
wheel, which the test extra installs).
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._replicas import _redis
from ._servers import SERVERS, RunningServer, ServerKind
from ._wire import Target
from ._wrk import run_wrk

KEY = "mooncake%2Fram%2F10.0.0.7%3A15868"
DESCRIPTOR = json.dumps(
    {
        "name": "10.0.0.7:15868",
        "protocol": "tcp",
        "tcp_data_host": "10.0.0.7",
        "tcp_data_port": 15080,
        "buffers": [{"name": f"cpu:{n}", "addr": 140000000000 + n * 4096, "length": 4096} for n in range(24)],
    }
).encode()[:2048]
ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _mooncakes_server() -> tuple[asyncio.subprocess.Process, Target]:
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mooncake.http_metadata_server", "--host", "127.0.0.1", "--port", str(port),
        "--log-level", "WARNING", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    async with asyncio.timeout(20):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            return process, Target("127.0.0.1", port)


async def _throughput(target: Target) -> tuple[float, float]:
    """GET and PUT requests a second of the descriptor's key."""
    put = await run_wrk(target, f"/metadata?key={KEY}", [DESCRIPTOR], seconds=3)
    get = await run_wrk(target, f"/metadata?key={KEY}", seconds=3)
    assert not get.errors["status"], get.errors
    return get.rate, put.rate


def _engine_timings(metadata: str) -> tuple[float, float]:
    """Seconds to a second engine's ``initialize``, and to its first write into the first engine."""
    helper = [sys.executable, "-m", "tests.helpers.mooncake_engine", metadata, "4096"]
    options = {
        "stdin": subprocess.PIPE,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.DEVNULL,
        "text": True,
    }
    first = subprocess.Popen(helper, cwd=ROOT, **options)  # type: ignore[call-overload]
    peer = json.loads(first.stdout.readline())
    started = time.perf_counter()
    second = subprocess.Popen(helper, cwd=ROOT, **options)  # type: ignore[call-overload]
    json.loads(second.stdout.readline())
    initialized = time.perf_counter()
    second.stdin.write(f"write {peer['name']} {peer['buffer']} {b'x'.hex()}\n")
    second.stdin.flush()
    assert json.loads(second.stdout.readline())["result"] == 0
    written = time.perf_counter()
    for process in (first, second):
        process.stdin.close()
        process.wait(20)
        process.stdout.close()
    return initialized - started, written - initialized


async def main() -> None:
    rows: list[tuple[str, float, float, float, float]] = []
    mooncake, target = await _mooncakes_server()
    try:
        get, put = await _throughput(target)
        timings = [_engine_timings(f"http://127.0.0.1:{target.port}/metadata") for _ in range(5)]
        rows.append(
            ("Mooncake's http_metadata_server", get, put, *map(statistics.median, zip(*timings, strict=True)))
        )
    finally:
        mooncake.terminate()
        await mooncake.wait()
    with tempfile.TemporaryDirectory(prefix="bench-mooncake-") as directory:
        async with _redis() as (redis_url, _):
            kinds = [
                ("aiobootstrap, memory store", SERVERS["aiobootstrap"]),
                ("aiobootstrap, file store", ServerKind("file", "file", (*SERVERS["aiobootstrap"].argv, "--state-file", f"{directory}/state"))),
                ("aiobootstrap, Redis", ServerKind("redis", "redis", (*SERVERS["aiobootstrap"].argv, "--store", redis_url))),
            ]  # fmt: skip
            for label, kind in kinds:
                server = await RunningServer.start(kind)
                try:
                    get, put = await _throughput(server.target)
                    timings = [_engine_timings(f"{server.url}/metadata") for _ in range(5)]
                    rows.append((label, get, put, *map(statistics.median, zip(*timings, strict=True))))
                finally:
                    await server.stop()
    base = rows[0]
    print("| server | GET /s | PUT /s | vs Mooncake (GET, PUT) | engine initialize | first peer write |")
    print("|---|---|---|---|---|---|")
    for label, get, put, init, write in rows:
        print(
            f"| {label} | {get:,.0f} | {put:,.0f} | {get / base[1]:.2f}x, {put / base[2]:.2f}x "
            f"| {init * 1000:.0f} ms | {write * 1000:.1f} ms |"
        )


if __name__ == "__main__":
    asyncio.run(main())
