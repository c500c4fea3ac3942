"""What one renewal of a parked watch costs the server: a page's (``&waits=&findings=``) against a plain one.

    python -m bench.watch_renewal [--renewals 400] [--wait 0.02] [--rounds 3]

A server process (``python -m aiobootstrap --world-size 64``, probing encoder
health as by default) and one keep-alive connection from a raw socket that
sends, one after another, ``--renewals`` long-polls that park and run out
after ``--wait`` s (a quiet server: what each of a page's renewals does every
25 s), in the exact bytes a client sends:

- aiohttp's client, ``GET /watch?after=V&wait=S`` (``bench.page``'s watchers);
- Chromium's ``fetch`` (its headers as captured from Debian's Chromium), the
  same query (a hidden tab's watch);
- Chromium's, with ``&waits=N&findings=M`` (a visible page's watch).

Each figure is the server's CPU time (the process's CPU clock, to the
nanosecond) over the renewals, less what it used idle over as long, per
renewal; variants alternated ``--rounds`` times, medians printed as a
Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

from ._servers import SERVERS, RunningServer

_AIOHTTP = (
    "Host: {host}\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\nUser-Agent: Python/3.11 aiohttp/3.9\r\n"
)
_CHROMIUM = (
    "Host: {host}\r\nConnection: keep-alive\r\nPragma: no-cache\r\nCache-Control: no-cache\r\n"
    'sec-ch-ua-platform: "Linux"\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 '
    "(KHTML, like Gecko) HeadlessChrome/156.0.0.0 Safari/537.36\r\n"
    'sec-ch-ua: "Not:A-Brand";v="8", "Chromium";v="156"\r\nsec-ch-ua-mobile: ?0\r\nAccept: */*\r\n'
    "Sec-Fetch-Site: same-origin\r\nSec-Fetch-Mode: cors\r\nSec-Fetch-Dest: empty\r\n"
    "Referer: http://{host}/\r\nAccept-Encoding: gzip, deflate, br, zstd\r\nAccept-Language: en-US,en;q=0.9\r\n"
)
"""What Chromium 156 sends for the page's ``fetch(..., {cache: "no-store"})`` of the same origin."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def get(self, request: bytes) -> dict[str, object]:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        body = await self.reader.readexactly(length)
        if status != 200:
            raise RuntimeError(f"GET answered {status}: {body!r}")
        return dict(json.loads(body))


def _request(path: str, headers: str, host: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\n{headers.format(host=host)}\r\n".encode()


async def _renewals(server: RunningServer, connection: _Connection, request: bytes, count: int) -> float:
    """The server's CPU seconds over ``count`` renewals, less what it used idle over as long after."""
    began, wall = server.cpu_clock_seconds(), time.perf_counter()
    for _ in range(count):
        await connection.get(request)
    used, wall = server.cpu_clock_seconds() - began, time.perf_counter() - wall
    idle = server.cpu_clock_seconds()
    await asyncio.sleep(wall)
    return used - (server.cpu_clock_seconds() - idle)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.watch_renewal")
    parser.add_argument("--renewals", type=int, default=400)
    parser.add_argument("--wait", type=float, default=0.02, help="seconds each renewal parks")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    server = await RunningServer.start(SERVERS["aiobootstrap"], "--world-size", "64")
    try:
        host = f"{server.target.host}:{server.target.port}"
        connection = _Connection(*await asyncio.open_connection(server.target.host, server.target.port))
        plain = _request("/watch?after=0&wait=0", _AIOHTTP, host)
        version = (await connection.get(plain))["version"]
        waits = (await connection.get(_request("/namespaces", _AIOHTTP, host)))["waits"]
        findings = (await connection.get(_request("/encoder_url_health", _AIOHTTP, host)))["findings"]
        query = f"/watch?after={version}&wait={args.wait:g}"
        looks = f"{query}&waits={waits}&findings={findings}"
        variants = {
            "aiohttp's client, plain watch": _request(query, _AIOHTTP, host),
            "Chromium's fetch, plain watch (a hidden tab)": _request(query, _CHROMIUM, host),
            "Chromium's fetch, &waits=&findings= (a visible page)": _request(looks, _CHROMIUM, host),
        }
        for request in variants.values():  # warm: every path's first call imports and caches
            await connection.get(request)
        costs: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, request in variants.items():
                used = await _renewals(server, connection, request, args.renewals)
                costs[name].append(used / args.renewals * 1e6)
                print(f"{name}: {costs[name][-1]:.0f} µs", file=sys.stderr)
        connection.writer.close()
    finally:
        await server.stop()
    base = statistics.median(costs["aiohttp's client, plain watch"])
    print(
        f"| a renewal that parks {args.wait:g} s and runs out, median of {args.rounds} | server CPU | ÷ plain |"
    )
    print("|---|---|---|")
    for name, runs in costs.items():
        cost = statistics.median(runs)
        print(f"| {name} | {cost:.0f} µs | {cost / base:.2f}\u00d7 |")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
