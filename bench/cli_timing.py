"""How fast the CLI fails on a taken port, and how fast it stops with parked waits.

    .venv/bin/python -m bench.cli_timing [--trials 5] [--waiters 1000]

SPEC §5 asks for exit 2 "within a second" on a taken port, and, on SIGTERM,
every parked long-poll answered at once and exit 0 within two seconds. These
are figures, not test assertions: the tests check the behaviour, this measures
it (medians of a few trials on the real CLI in subprocesses, on loopback).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request


def port_clash_seconds() -> tuple[float, int]:
    """Start to exit of ``python -m aiobootstrap`` on a port another socket holds."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "aiobootstrap", "--port", str(port)],
            capture_output=True,
            timeout=30,
            check=False,
        )
        return time.perf_counter() - started, result.returncode


async def shutdown_seconds(waiters: int) -> tuple[float, float, set[str], int]:
    """SIGTERM with ``waiters`` parked gets: until all are answered, until exit; their statuses."""
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is timed
        [sys.executable, "-m", "aiobootstrap", "--port", "0", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().split()[-1]
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connections = []
    for index in range(waiters):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            f"GET /get_transfer_engine_info?rank={index % 7}&wait=60 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        )
        connections.append((reader, writer))
    async with asyncio.timeout(30):
        while True:
            with urllib.request.urlopen(url + "/ranks", timeout=5) as reply:  # noqa: ASYNC210 - a tiny local poll
                if json.loads(reply.read())["waiters"] >= waiters:
                    break
            await asyncio.sleep(0.05)
    started = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    lines = await asyncio.gather(*(reader.readline() for reader, _ in connections))
    answered = time.perf_counter() - started
    status = await asyncio.to_thread(process.wait, 30)
    exited = time.perf_counter() - started
    for _, writer in connections:
        writer.close()
    return answered, exited, {line.split()[1].decode() for line in lines}, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--waiters", type=int, default=1000)
    args = parser.parse_args()
    clashes = [port_clash_seconds() for _ in range(args.trials)]
    print(
        f"taken port: exit {sorted({code for _, code in clashes})} after "
        f"{statistics.median(t for t, _ in clashes) * 1e3:.0f} ms (median of {args.trials}; "
        f"max {max(t for t, _ in clashes) * 1e3:.0f} ms)"
    )
    stops = [asyncio.run(shutdown_seconds(args.waiters)) for _ in range(args.trials)]
    print(
        f"SIGTERM with {args.waiters} parked gets: all answered {sorted(set().union(*(s[2] for s in stops)))} "
        f"in {statistics.median(s[0] for s in stops) * 1e3:.0f} ms, exit {sorted({s[3] for s in stops})} "
        f"after {statistics.median(s[1] for s in stops) * 1e3:.0f} ms (median of {args.trials}; "
        f"max {max(s[1] for s in stops) * 1e3:.0f} ms)"
    )


if __name__ == "__main__":
    main()
