"""How fast the CLI fails on a taken port, and how fast it stops with parked waits.

    .venv/bin/python -m bench.cli_timing [--trials 5] [--waiters 1000] [--before PYTHON]

``--before`` names the interpreter of another tree (another worktree's
``.venv/bin/python``, whose editable install is that tree): its trials
alternate with this tree's, so both sides see the same machine load.

SPEC §5 asks for exit 2 "within a second" on a taken port, and, on SIGTERM,
every parked long-poll answered at once and exit 0 within two seconds. These
are figures, not test assertions: the tests check the behaviour, this measures
it (medians of a few trials on the real CLI in subprocesses, on loopback).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
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


async def shutdown_seconds(waiters: int, python: str = sys.executable) -> tuple[float, float, set[str], int]:
    """SIGTERM with ``waiters`` parked gets: until all are answered, until exit; their statuses."""
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is timed
        # --max-waiters: the default keeps 1,024 descriptors in reserve, too few for 19,000 under 20,000.
        [
            python,
            "-m",
            "aiobootstrap",
            "--port",
            "0",
            "--log-level",
            "warning",
            "--max-waiters",
            str(waiters + 64),
        ],
        stdout=subprocess.PIPE,
        text=True,
        # Outside any checkout: -m imports the working directory's package first, which
        # would make another tree's interpreter run this tree.
        cwd=tempfile.gettempdir(),
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


def raise_open_file_limit() -> None:
    """Each parked get holds a socket here too: the soft limit raised to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--waiters", type=int, default=1000)
    parser.add_argument(
        "--before",
        metavar="PYTHON",
        help="another tree's interpreter: its shutdown trials alternate with these",
    )
    args = parser.parse_args()
    raise_open_file_limit()
    clashes = [port_clash_seconds() for _ in range(args.trials)]
    print(
        f"taken port: exit {sorted({code for _, code in clashes})} after "
        f"{statistics.median(t for t, _ in clashes) * 1e3:.0f} ms (median of {args.trials}; "
        f"max {max(t for t, _ in clashes) * 1e3:.0f} ms)"
    )
    sides = (
        {"": sys.executable} if args.before is None else {"before: ": args.before, "after: ": sys.executable}
    )
    stops: dict[str, list[tuple[float, float, set[str], int]]] = {label: [] for label in sides}
    for _ in range(args.trials):
        for label, python in sides.items():
            stops[label].append(asyncio.run(shutdown_seconds(args.waiters, python)))
    for label, runs in stops.items():
        print(
            f"{label}SIGTERM with {args.waiters} parked gets: all answered "
            f"{sorted(set().union(*(s[2] for s in runs)))} in {statistics.median(s[0] for s in runs) * 1e3:.0f} ms, "
            f"exit {sorted({s[3] for s in runs})} after {statistics.median(s[1] for s in runs) * 1e3:.0f} ms "
            f"(median of {args.trials}; max {max(s[1] for s in runs) * 1e3:.0f} ms)"
        )


if __name__ == "__main__":
    main()
