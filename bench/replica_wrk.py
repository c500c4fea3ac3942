"""Replicas over Redis vs one in-memory process under ``wrk -c64``, side by side in one run (issue 21).

Run from the repository root (needs ``wrk`` and ``redis-server`` on PATH)::

    .venv/bin/python -m bench.replica_wrk                       # 5 rounds of 3 s per load
    .venv/bin/python -m bench.replica_wrk --before /tmp/before  # and a replica of an older tree beside

It starts a ``redis-server`` of its own (free port, temporary directory, AOF
with ``appendfsync always``, as ``_replicas`` does), one in-memory
aiobootstrap, two replicas of this tree over that Redis and, with
``--before``, one replica of the tree in that directory (``git archive
f553f67 | tar -x -C /tmp/before``). Each round runs, for every target in
turn on the same two cores:

``get``   ``wrk -t1 -c64`` GETs of one registered rank (4 tensors, as ``make bench``)
``put``   ``wrk -t1 -c64`` PUTs of 1,024 registrations (4 tensors), replaced in turn

and, for "two replicas together", two ``wrk -t1 -c32`` at once, one on
each replica, their rates summed. Figures per target and load: median rate
over the rounds, its ratio to the in-memory process's median, and the
server's (and Redis's) CPU per request: the process's user plus system time
over the run divided by the requests wrk counted. ``--profile DIR`` runs the
replicas under ``cProfile`` and writes ``DIR/<label>.prof`` at their stop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._replicas import _redis, wrk_load
from ._scenarios import _register
from ._servers import cpu_seconds, start_in_tree, stop_gracefully
from ._wire import Target
from ._wrk import find_wrk

ROOT = Path(__file__).resolve().parent.parent
_BANNER = "aiobootstrap listening on "
_ARGV = ("-m", "aiobootstrap", "--port", "0", "--log-level", "warning")
_PROFILED = (
    "import atexit, cProfile, sys, runpy\n"
    "profile, out = cProfile.Profile(), sys.argv.pop(1)\n"
    "atexit.register(lambda: (profile.disable(), profile.dump_stats(out)))\n"
    "profile.enable()\n"
    "runpy.run_module('aiobootstrap', run_name='__main__', alter_sys=True)\n"
)


@dataclass
class Server:
    label: str
    process: asyncio.subprocess.Process
    target: Target

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.process.pid)

    async def stop(self) -> None:
        await stop_gracefully(self.process, 20.0)  # a profiled server writes its profile as it exits


async def _start(label: str, tree: Path, options: tuple[str, ...], profile: Path | None) -> Server:
    """``python -m aiobootstrap`` of ``tree`` (its own package first on the path), on a free port."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(tree))
    argv: tuple[str, ...] = (*_ARGV, *options)
    if profile is not None:
        argv = ("-c", _PROFILED, str(profile / f"{label}.prof"), *argv[2:])
    process, url = await start_in_tree(label, tree, list(argv), _BANNER, log="replica_wrk", env=env)
    return Server(label, process, Target.from_url(url))


async def main(args: argparse.Namespace) -> dict[str, Any]:
    if find_wrk() is None:
        raise SystemExit("wrk is not installed (Debian: wrk)")
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    async with _redis() as (url, store_pid):
        store = ("--store", url)
        profile = args.profile
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
        memory = await _start("memory", ROOT, (), None)
        a = await _start("replica", ROOT, store, profile)
        b = await _start("replica-b", ROOT, store, None)
        servers = [memory, a, b]
        targets: dict[str, list[Server]] = {"memory": [memory], "replica": [a]}
        if args.before is not None:
            # Its own prefix: the older tree's records keep no encoded reply.
            old = await _start("before", args.before.resolve(), (*store, "--store-prefix", "before"), profile)
            servers.append(old)
            targets["replica (before)"] = [old]
        targets["two replicas"] = [a, b]
        try:
            for server in servers:
                await _register(server.target, 0, 4)
            for _ in range(args.rounds):
                for load in ("get_small", "put_small"):
                    for name, group in targets.items():
                        pid = None if name == "memory" else store_pid
                        figure = await wrk_load(group, load, args.seconds, pid)
                        results.setdefault(name, {}).setdefault(load, []).append(figure)
        finally:
            for server in servers:
                await server.stop()
    return _summary(results)


def _summary(results: dict[str, dict[str, list[dict[str, float]]]]) -> dict[str, Any]:
    medians = {
        name: {
            load: {field: statistics.median(r[field] for r in runs) for field in runs[0]}
            for load, runs in loads.items()
        }
        for name, loads in results.items()
    }
    for loads in medians.values():
        for load, figure in loads.items():
            figure["ratio"] = figure["rps"] / medians["memory"][load]["rps"]
            figure["cpu_ratio"] = (
                medians["memory"][load]["server_us_per_request"] / figure["server_us_per_request"]
            )
    return medians


def _print(summary: dict[str, Any], rounds: int, seconds: float) -> None:
    print(f"wrk -t1 -c64 (two replicas: -c32 each), {rounds} round(s) of {seconds:g} s; medians")
    print(
        f"{'target':<18} {'load':<9} {'req/s':>8} {'vs mem':>7} {'srv µs/req':>11} {'redis µs/req':>13} {'CPU ratio':>9}"
    )
    for name, loads in summary.items():
        for load, f in loads.items():
            print(
                f"{name:<18} {load:<9} {f['rps']:>8,.0f} {f['ratio']:>6.2f}x "
                f"{f['server_us_per_request']:>11.0f} {f['store_us_per_request']:>13.1f} {f['cpu_ratio']:>8.2f}x"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--before", type=Path, default=None, help="a tree of an older commit to run beside")
    parser.add_argument("--profile", type=Path, default=None, help="write each replica's cProfile here")
    parser.add_argument("--json", type=Path, default=None, help="also write the medians here")
    arguments = parser.parse_args()
    figures = asyncio.run(main(arguments))
    _print(figures, arguments.rounds, arguments.seconds)
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(figures, indent=2))
