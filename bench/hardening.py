"""What the hardening costs: memory per parked wait, and the token check per request.

    python bench/hardening.py [--waiters 5000] [--requests 2000] [--runs 5]

Runs the real CLI server in a subprocess on a free loopback port; the
server's memory is read from /proc (Linux only). Prints medians over runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp

from ._servers import rss_kib
from .durability import running

TOKEN = "bench-token"


@asynccontextmanager
async def cli_server(*args: str) -> AsyncIterator[tuple[str, int]]:
    env = {**os.environ, "AIOBOOTSTRAP_AUTH_TOKEN": TOKEN} if "--auth" in args else None
    async with running(*(a for a in args if a != "--auth"), env=env) as server:
        yield server.url, server.pid


async def parked_wait_memory(waiters: int) -> tuple[float, float]:
    """Server RSS growth per parked wait, in KiB: a first wave, then a second after it hung up."""
    async with cli_server() as (url, pid), aiohttp.ClientSession() as session:
        port = int(url.rsplit(":", 1)[1])
        # A server that answered once: its imports and first-use allocations are done.
        async with session.get(url + "/health") as response:
            await response.read()
        # Wave 1 is the cost of parking; wave 2, after wave 1 hung up, shows how much
        # of it the server reuses instead of growing again.
        growth = []
        for _ in range(2):
            before = rss_kib(pid)["VmRSS"]
            writers = []
            for index in range(waiters):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(
                    f"GET /get_transfer_engine_info?rank={index}&wait=60 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
                )
                writers.append(writer)
            for writer in writers:
                await writer.drain()
            # The server reports nothing about its waiters over HTTP; /health answering
            # after the last request was written means it has read them all.
            while True:
                async with session.get(url + "/health") as response:
                    await response.read()
                grown = rss_kib(pid)["VmRSS"] - before
                await asyncio.sleep(0.2)
                if rss_kib(pid)["VmRSS"] - before == grown:
                    break
            growth.append(grown / waiters)
            for writer in writers:
                writer.close()
        return growth[0], growth[1]


async def request_rate(auth: bool, requests: int) -> float:
    """Sequential gets of a registered rank per second, with or without the token check."""
    async with cli_server(*(["--auth"] if auth else [])) as (url, _), aiohttp.ClientSession() as session:
        headers = {"Authorization": f"Bearer {TOKEN}"} if auth else {}
        body = {"rank": 0, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {}}}
        async with session.put(
            url + "/register_transfer_engine_info", json=body, headers=headers
        ) as response:
            assert response.status == 200
        started = time.perf_counter()
        for _ in range(requests):
            async with session.get(url + "/get_transfer_engine_info?rank=0", headers=headers) as response:
                assert response.status == 200
                await response.read()
        return requests / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", type=int, default=5000)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    memory = [await parked_wait_memory(args.waiters) for _ in range(args.runs)]
    first = statistics.median(m[0] for m in memory)
    again = statistics.median(m[1] for m in memory)
    print(
        f"server RSS growth per parked wait ({args.waiters} waits): median {first:.2f} KiB; "
        f"for a second wave after the first hung up: {again:.2f} KiB"
    )
    plain, authed = [], []
    for _ in range(args.runs):
        plain.append(await request_rate(False, args.requests))
        authed.append(await request_rate(True, args.requests))
    p, a = statistics.median(plain), statistics.median(authed)
    print(f"gets/s without token: median {p:.0f}; with token: median {a:.0f}; ratio {a / p:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
