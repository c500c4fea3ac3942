"""What one renewal of a parked watch costs the server: a page's (``&waits=&findings=``) against a plain one.

    python -m bench.watch_renewal [--renewals 400] [--wait 0.02] [--rounds 3] [--calls]

A server (world size 64, probing encoder health as by default) and one
keep-alive connection from a raw socket that sends, one after another,
``--renewals`` long-polls that park and run out after ``--wait`` s (a quiet
server: what each of a page's renewals does every 25 s), in the exact bytes
a client sends:

- aiohttp's client, ``GET /watch?after=V&wait=S`` (``bench.page``'s watchers);
- Chromium's ``fetch`` (its headers as captured from Debian's Chromium), the
  same query (a hidden tab's watch);
- Chromium's, with ``&waits=N&findings=M`` (a visible page's watch).

By default the server is a process (``python -m aiobootstrap``) and each
figure is its CPU time (the process's CPU clock, to the nanosecond) over the
renewals, less what it used idle over as long, per renewal; variants
alternated ``--rounds`` times, medians printed as a Markdown table. On a
shared machine those move by ±20 %; ``--calls`` counts instead what does
not move: the app served in this process under ``cProfile`` (the client a
blocking socket in a thread, which the profiler does not see), per renewal,
the Python function calls, the event loop's turns and the tasks made.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import socket
import statistics
import sys
import time

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.appkeys import REGISTRY
from aiobootstrap.server.faces.encoders.health import ENCODER_HEALTH

from ._servers import SERVERS, RunningServer, serve_in_process

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


PLAIN = "aiohttp's client, plain watch"


def _variants(host: str, version: int, waits: int, findings: int, wait: float) -> dict[str, bytes]:
    query = f"/watch?after={version}&wait={wait:g}"
    looks = f"{query}&waits={waits}&findings={findings}"
    return {
        PLAIN: _request(query, _AIOHTTP, host),
        "Chromium's fetch, plain watch (a hidden tab)": _request(query, _CHROMIUM, host),
        "Chromium's fetch, &waits=&findings= (a visible page)": _request(looks, _CHROMIUM, host),
    }


async def _cpu(renewals: int, wait: float, rounds: int) -> str:
    server = await RunningServer.start(SERVERS["aiobootstrap"], "--world-size", "64")
    try:
        host = f"{server.target.host}:{server.target.port}"
        connection = _Connection(*await asyncio.open_connection(server.target.host, server.target.port))
        version = (await connection.get(_request("/watch?after=0&wait=0", _AIOHTTP, host)))["version"]
        waits = (await connection.get(_request("/namespaces", _AIOHTTP, host)))["waits"]
        findings = (await connection.get(_request("/encoder_url_health", _AIOHTTP, host)))["findings"]
        variants = _variants(host, int(str(version)), int(str(waits)), int(str(findings)), wait)
        for request in variants.values():  # warm: every path's first call imports and caches
            await connection.get(request)
        costs: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, request in variants.items():
                used = await _renewals(server, connection, request, renewals)
                costs[name].append(used / renewals * 1e6)
                print(f"{name}: {costs[name][-1]:.0f} µs", file=sys.stderr)
        connection.writer.close()
    finally:
        await server.stop()
    base = statistics.median(costs[PLAIN])
    lines = [
        f"| a renewal that parks {wait:g} s and runs out, median of {rounds} | server CPU | ÷ plain |",
        "|---|---|---|",
    ]
    for name, runs in costs.items():
        cost = statistics.median(runs)
        lines.append(f"| {name} | {cost:.0f} µs | {cost / base:.2f}\u00d7 |")
    return "\n".join(lines)


def _blocking_renewals(port: int, request: bytes, count: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock, sock.makefile("rb") as replies:
        for _ in range(count):
            sock.sendall(request)
            length = 0
            while (line := replies.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            replies.read(length)


async def _calls(renewals: int, wait: float) -> str:
    app = create_app(ServerConfig(world_size=64))
    runner, port = await serve_in_process(app)
    try:
        moves, findings = app[REGISTRY].parking.wait_changes.count, app[ENCODER_HEALTH].probe_changes.count
        variants = _variants(f"127.0.0.1:{port}", 0, moves, findings, wait)
        lines = [
            f"| per renewal that parks {wait:g} s and runs out ({renewals}) | Python calls | loop turns "
            "| tasks made |",
            "|---|---|---|---|",
        ]
        for name, request in variants.items():
            await asyncio.to_thread(_blocking_renewals, port, request, 5)  # warm
            profile = cProfile.Profile()
            profile.enable()
            await asyncio.to_thread(_blocking_renewals, port, request, renewals)
            profile.disable()
            counted = pstats.Stats(profile).stats  # type: ignore[attr-defined]
            calls = sum(each[1] for each in counted.values())
            turns = sum(each[1] for (_, _, function), each in counted.items() if function == "_run_once")
            tasks = sum(each[1] for (_, _, function), each in counted.items() if function == "create_task")
            lines.append(
                f"| {name} | {calls / renewals:.0f} | {turns / renewals:.1f} | {tasks / renewals:.1f} |"
            )
        return "\n".join(lines)
    finally:
        await runner.cleanup()


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.watch_renewal")
    parser.add_argument("--renewals", type=int, default=400)
    parser.add_argument("--wait", type=float, default=0.02, help="seconds each renewal parks")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", action="store_true", help="count calls, loop turns and tasks instead")
    args = parser.parse_args(argv)
    if args.calls:
        print(await _calls(args.renewals, args.wait))
    else:
        print(await _cpu(args.renewals, args.wait, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
