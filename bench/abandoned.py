"""Abandoned waits at scale: 10,000 long-polls parked and dropped leave nothing behind.

    python -m bench.abandoned [--waits 10000] [--wave 500]

Runs the app in this process on a free loopback port (handler cancellation on,
as ``BootstrapServer`` runs it), parks
waves of raw-socket waits (single and batch, some sharing a rank), hangs up on
each wave, and measures with ``tracemalloc`` what the server kept. Exits 1 if
any waiter or waitlist is left, or memory grew by more than the bound: a leak
of 100 bytes per abandoned wait shows as about 1 MB. The test suite runs a
small version of this (``tests/test_bad_input.py``); this one takes ~15 s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import tracemalloc

from aiohttp import web

from aiobootstrap import Registry, ServerConfig, create_app
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.server.open_files import raise_open_file_limit

from ._servers import serve_in_process

BOUND = 512 * 1024
"""Bytes the server may grow by over the whole run (caches settling), leaks excluded."""


async def _until(predicate: object, guard: float = 30.0) -> None:
    assert callable(predicate)
    async with asyncio.timeout(guard):
        while not predicate():  # noqa: ASYNC110 -- no hook to await: yield to the server's tasks
            await asyncio.sleep(0)


async def abandon_wave(runner: web.AppRunner, registry: Registry, port: int, first: int, wave: int) -> None:
    """Park ``wave`` waits, then hang up on every one and wait for the server to let go."""
    writers = []
    for index in range(first, first + wave):
        if index % 3 == 0:
            target = f"/get_transfer_engine_info_batch?ranks={index % 40}-{index % 40 + 3}&wait=60"
        else:
            rank = 100 + index % 7 if index % 2 else 1000 + index
            target = f"/get_transfer_engine_info?rank={rank}&wait=60"
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        writers.append(writer)
    await _until(lambda: registry.parked == wave)
    for writer in writers:
        writer.close()
    await _until(lambda: registry.parked == 0 and registry.waiting_keys == 0)
    for writer in writers:
        await writer.wait_closed()
    # The server drops its side of each connection a few turns of the loop later.
    server = runner.server
    assert server is not None
    await _until(lambda: not server.connections)


async def run(waits: int, wave: int) -> int:
    app = create_app(ServerConfig(max_wait=300.0))
    runner, port = await serve_in_process(app)
    registry = app[REGISTRY]
    try:
        started = time.perf_counter()
        await abandon_wave(runner, registry, port, 0, wave)  # warm up caches and pools before measuring
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for first in range(wave, waits, wave):
                await abandon_wave(runner, registry, port, first, wave)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        seconds = time.perf_counter() - started
        left = (registry.parked, registry.waiting_keys)
    finally:
        await runner.cleanup()
    print(
        f"{waits} abandoned waits in {seconds:.1f} s: memory grew {grown} bytes "
        f"({grown / waits:.1f} per wait, bound {BOUND}); parked and waitlists left: {left}"
    )
    return 0 if left == (0, 0) and grown < BOUND else 1


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.abandoned", description=__doc__.split("\n")[0])
    parser.add_argument("--waits", type=int, default=10_000)
    parser.add_argument("--wave", type=int, default=500)
    args = parser.parse_args()
    raise_open_file_limit()  # both ends of every parked wait are in this process
    return asyncio.run(run(args.waits, args.wave))


if __name__ == "__main__":
    sys.exit(main())
