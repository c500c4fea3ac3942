"""Mooncake's metadata server face, side by side with Mooncake's own ``http_metadata_server``.

One figure per server: ``GET`` and ``PUT`` of a 2 KB segment descriptor (the
JSON a TCP transfer engine ``PUT``s under ``mooncake/ram/NAME``) under
``wrk -c64``, requests a second. Mooncake's server (``python -m
mooncake.http_metadata_server``, from the ``mooncake-transfer-engine-non-cuda``
wheel: an aiohttp app over a dict behind a lock) runs in a process of its own,
as does aiobootstrap on its memory store, its file store and a redis-server of
its own (AOF, ``appendfsync always``).

``python -m bench.mooncake`` (``--seconds S`` per figure, 3 by default; ``--rounds N``
over every server in turn, 3 by default: each figure is the median of its rounds).
``--loop asyncio`` or ``--loop uvloop`` runs every server on that loop, Mooncake's included (its
thread's ``new_event_loop`` then makes a uvloop loop); by default each server runs as installed
(aiobootstrap on uvloop when it is installed, Mooncake's server on asyncio's). ``--stores memory``
measures only those of aiobootstrap's stores (``memory,file,redis`` by default). ``--before TREE``
also serves aiobootstrap's memory store from another checkout (``git worktree add /tmp/before
COMMIT``), taking turns with the others: a change measured side by side in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from ._servers import SERVERS, RunningServer, start_in_tree, stop_gracefully
from ._wire import Target
from ._wrk import find_wrk, run_wrk
from .store_redis import _free_port, _start_redis

PATH = "/metadata?key=mooncake%2Fram%2Fbench-segment"
MOONCAKE = "mooncake.http_metadata_server"
LOOPS = ("installed", "asyncio", "uvloop")
# Mooncake's server on uvloop: its thread's asyncio.new_event_loop() asks the policy.
_MOONCAKE_ON_UVLOOP = (
    "import asyncio, runpy, uvloop; asyncio.set_event_loop_policy(uvloop.EventLoopPolicy()); "
    f"runpy.run_module({MOONCAKE!r}, run_name='__main__', alter_sys=True)"
)


def aiobootstrap_argv(loop: str) -> list[str]:
    """``python ARGV`` serving aiobootstrap quietly on ``loop`` (uvloop blocked for asyncio's own)."""
    quiet = ["--port", "0", "--log-level", "warning"]
    if loop == "asyncio":
        return ["-m", "bench.plain", "--without", "uvloop", "--", *quiet]
    if loop == "uvloop":
        import uvloop  # noqa: F401 - asked for: fail here, not as a server that silently runs asyncio's loop

    return ["-m", "aiobootstrap", *quiet]


def descriptor(serial: int) -> bytes:
    """A TCP engine's segment descriptor of about 2 KB: 16 registered buffers, as ``register_memory`` PUTs."""
    buffers = [
        {
            "addr": 0x7F0000000000 + i * (1 << 24) + serial,
            "length": 1 << 24,
            "name": "cpu:0",
            "rkey": [],
            "lkey": [],
        }
        for i in range(16)
    ]
    body = {
        "name": "127.0.0.1:15868",
        "protocol": "tcp",
        "tcp_data_host": "127.0.0.1",
        "tcp_data_port": 15868,
        "tcp_proto_version": 1,
        "timestamp": str(1_700_000_000 + serial),
        "buffers": buffers,
        "devices": [],
        "priority_matrix": {},
    }
    text = json.dumps(body, separators=(",", ":")).encode()
    return text + b" " * max(0, 2048 - len(text))  # exactly 2 KB, whitespace a JSON reader skips


@contextlib.asynccontextmanager
async def mooncake_server(loop: str = "installed") -> AsyncIterator[Target]:
    """``python -m mooncake.http_metadata_server`` on a free loopback port (on uvloop for ``loop="uvloop"``);
    it prints nothing when ready, so the port is polled until it accepts."""
    async with mooncake_process(loop) as (target, _):
        yield target


@contextlib.asynccontextmanager
async def mooncake_process(loop: str = "installed") -> AsyncIterator[tuple[Target, int]]:
    """:func:`mooncake_server`, and its process id (whose CPU a benchmark reads)."""
    port = _free_port()
    start = ["-c", _MOONCAKE_ON_UVLOOP] if loop == "uvloop" else ["-m", MOONCAKE]
    argv = [*start, "--host", "127.0.0.1", "--port", str(port)]
    process = await asyncio.create_subprocess_exec(
        sys.executable, *argv, "--log-level", "WARNING", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline or process.returncode is not None:
                raise RuntimeError("mooncake.http_metadata_server did not start")
            await asyncio.sleep(0.05)
        yield Target("127.0.0.1", port), process.pid
    finally:
        process.terminate()
        await process.wait()


async def measure(target: Target, seconds: float) -> dict[str, float]:
    """GET then PUT of the descriptor under ``wrk -c64``: requests/s, p99 ms, non-2xx replies."""
    url = f"http://{target.host}:{target.port}{PATH}"
    async with aiohttp.ClientSession() as http, http.put(url, data=descriptor(0)) as reply:
        assert reply.status == 200, await reply.text()
    got = await run_wrk(target, PATH, seconds=seconds)
    put = await run_wrk(target, PATH, [descriptor(serial) for serial in range(1, 33)], seconds=seconds)
    return {
        "GET/s": got.rate,
        "GET p99 ms": got.p99 * 1000,
        "PUT/s": put.rate,
        "PUT p99 ms": put.p99 * 1000,
        "errors": got.errors["status"] + put.errors["status"],
    }


def medians(rounds: list[dict[str, float]]) -> dict[str, Any]:
    """Each figure's median over the rounds (errors: their sum)."""
    figures: dict[str, Any] = {
        name: round(statistics.median(r[name] for r in rounds), 2 if "ms" in name else None)
        for name in rounds[0]
        if name != "errors"
    }
    figures["errors"] = sum(r["errors"] for r in rounds)
    return figures


async def main(
    seconds: float, rounds: int, loop: str = "installed", stores: str = "memory,file,redis", before: str = ""
) -> None:
    if not find_wrk():
        sys.exit("wrk is not installed (Debian's package wrk)")
    runs: dict[str, list[dict[str, float]]] = {}
    argv = aiobootstrap_argv(loop)
    with tempfile.TemporaryDirectory(prefix="bench-mooncake-") as directory:
        redis, redis_url = _start_redis(Path(directory)) if "redis" in stores.split(",") else (None, "")
        servers: dict[str, RunningServer] = {}
        others: list[asyncio.subprocess.Process] = []
        try:
            async with mooncake_server(loop) as mooncake:
                targets: dict[str, Target] = {MOONCAKE: mooncake}
                if before:
                    process, url = await start_in_tree(
                        "before",
                        Path(before),
                        [*argv, "--store", "memory:"],
                        "aiobootstrap listening on ",
                        log="mooncake",
                    )
                    others.append(process)
                    targets["aiobootstrap memory: (before)"] = Target.from_url(url)
                kind = dataclasses.replace(SERVERS["aiobootstrap"], argv=tuple(argv))
                for name, label, store in (
                    ("memory", "aiobootstrap memory:", "memory:"),
                    ("file", "aiobootstrap file:", f"file:{directory}/state.jsonl"),
                    ("redis", "aiobootstrap redis (AOF always)", redis_url),
                ):
                    if name in stores.split(","):
                        servers[label] = await RunningServer.start(kind, "--store", store)
                        targets[label] = servers[label].target
                # Round after round, every server in turn: a noisy minute of the machine falls on all alike.
                for _ in range(rounds):
                    for label, target in targets.items():
                        runs.setdefault(label, []).append(await measure(target, seconds))
        finally:
            for server in servers.values():
                await server.stop()
            for process in others:
                await stop_gracefully(process)
            if redis is not None:
                redis.kill()
                redis.wait()
    results = {label: medians(figures) for label, figures in runs.items()}
    base = results[MOONCAKE]
    for label, figures in results.items():
        figures["GET x"] = round(figures["GET/s"] / base["GET/s"], 2)
        figures["PUT x"] = round(figures["PUT/s"] / base["PUT/s"], 2)
        print(json.dumps({"server": label, "loop": loop, **figures}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of wrk per figure (default: 3)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds over every server; medians (default: 3)"
    )
    parser.add_argument(
        "--loop", choices=LOOPS, default="installed", help="every server's loop (default: as installed)"
    )
    parser.add_argument(
        "--stores", default="memory,file,redis", help="aiobootstrap's stores measured (default: all three)"
    )
    parser.add_argument("--before", default="", help="also serve memory: from this checkout, in turn")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.seconds, arguments.rounds, arguments.loop, arguments.stores, arguments.before))
