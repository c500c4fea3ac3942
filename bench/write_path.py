"""The write path side by side: requests a second and the server's CPU per request, this tree against another
checkout and the baseline, in alternating rounds of one run.

``python -m bench.write_path --figure mooncake-put --before /tmp/before`` starts, each in a process of its
own: the baseline (Mooncake's own ``http_metadata_server`` for the Mooncake figures, ``bench.reference``
for the engine-info ones), aiobootstrap on its memory store from this tree (``after``) and, with
``--before TREE``, from that checkout (``git worktree add /tmp/before COMMIT``). Then ``--rounds`` rounds,
every server in turn in each, of ``wrk -t1 -c64`` for ``--seconds``; each rate is the median of its
rounds, and its ratio to the baseline the median of the rounds' ratios (each round's rate over the
baseline's in that round). A shared machine's noisy minute falls on every server alike;
the CPU per request (the server process's own, from ``/proc/PID/task/*/schedstat``) moves less with the
machine's load than the rate does.

Figures (``--figure``, several comma-separated):

- ``mooncake-put``, ``mooncake-get``: ``PUT``/``GET /metadata?key=`` of a 2 KB segment descriptor
  (``bench.mooncake``'s);
- ``engine-put-32``, ``engine-put-real``: ``PUT /register_transfer_engine_info`` of a 32-tensor info (~2 KB,
  ranks cycling over 1,024) and of a realistic one (~60 KB, 64 ranks), as ``python -m bench``'s throughput.

``--loop asyncio`` or ``--loop uvloop`` runs every server on that loop (Mooncake's server too; the
reference's uvicorn picks uvloop itself); by default each runs as installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import aiohttp

from ._data import registration, weights
from ._servers import SERVERS, RunningServer, cpu_ns, start_in_tree, stop_gracefully
from ._wire import Target
from ._wrk import find_wrk, run_wrk
from .mooncake import LOOPS, PATH, aiobootstrap_argv, descriptor, mooncake_process

ROOT = Path(__file__).resolve().parent.parent
REGISTER = "/register_transfer_engine_info"
BANNER = "aiobootstrap listening on "

FIGURES: dict[str, tuple[str, str, Any]] = {
    # figure: (baseline, path, the PUT bodies wrk sends in turn, or None for a GET)
    "mooncake-put": ("mooncake", PATH, lambda: [descriptor(serial) for serial in range(1, 33)]),
    "mooncake-get": ("mooncake", PATH, None),
    "engine-put-32": ("reference", REGISTER, lambda: [registration(2 + i, weights(32)) for i in range(1024)]),
    "engine-put-real": (
        "reference",
        REGISTER,
        lambda: [registration(2 + i, weights(1000)) for i in range(64)],
    ),
}


async def _seed(target: Target) -> None:
    """What the GETs read: the Mooncake descriptor (rank registrations need nothing before)."""
    async with (
        aiohttp.ClientSession() as http,
        http.put(f"http://{target.host}:{target.port}{PATH}", data=descriptor(0)) as reply,
    ):
        reply.raise_for_status()


async def _measure(
    targets: dict[str, tuple[Target, int]], path: str, bodies: list[bytes] | None, rounds: int, seconds: float
) -> dict[str, dict[str, Any]]:
    samples: dict[str, list[tuple[float, float, int]]] = {label: [] for label in targets}
    for _ in range(rounds):
        for label, (target, pid) in targets.items():
            before = cpu_ns(pid)
            result = await run_wrk(target, path, bodies, seconds=seconds)
            used = cpu_ns(pid) - before
            samples[label].append(
                (result.rate, used / 1000 / max(1, result.requests), result.errors["status"])
            )
    base = samples["baseline"]
    return {
        label: {
            "req/s": round(statistics.median(s[0] for s in runs)),
            # Each round's ratio to the baseline's rate in that round, then their median: a burst of other
            # work that slows a whole round moves its rates, much less their ratio.
            "x baseline": round(statistics.median(s[0] / b[0] for s, b in zip(runs, base, strict=True)), 2),
            "cpu us/req": round(statistics.median(s[1] for s in runs), 1),
            "cpu x baseline": round(
                statistics.median(s[1] / b[1] for s, b in zip(runs, base, strict=True)), 2
            ),
            "req/s per round": [round(s[0]) for s in runs],
            "errors": sum(s[2] for s in runs),
        }
        for label, runs in samples.items()
    }


async def main(
    figures: list[str], loop: str, rounds: int, seconds: float, before: str, after: str = ""
) -> None:
    if not find_wrk():
        sys.exit("wrk is not installed (Debian's package wrk)")
    argv = [*aiobootstrap_argv(loop), "--store", "memory:"]
    trees = {"after": Path(after) if after else ROOT} | ({"before": Path(before)} if before else {})
    for baseline in dict.fromkeys(FIGURES[figure][0] for figure in figures):
        processes: list[asyncio.subprocess.Process] = []
        reference: RunningServer | None = None
        try:
            targets: dict[str, tuple[Target, int]] = {}
            async with mooncake_process(loop) as (mooncake, pid):
                if baseline == "mooncake":
                    targets["baseline"] = (mooncake, pid)
                else:
                    reference = await RunningServer.start(SERVERS["reference"])
                    targets["baseline"] = (reference.target, reference.pid)
                for label, tree in trees.items():
                    # Each tree's own aiobootstrap: its directory first on sys.path.
                    env = dict(os.environ, PYTHONPATH=str(tree))
                    process, url = await start_in_tree(label, tree, argv, BANNER, log="write_path", env=env)
                    processes.append(process)
                    targets[label] = (Target.from_url(url), process.pid)
                if baseline == "mooncake":
                    for target, _ in targets.values():
                        await _seed(target)
                for figure in figures:
                    if FIGURES[figure][0] != baseline:
                        continue
                    _, path, make = FIGURES[figure]
                    results = await _measure(targets, path, make and make(), rounds, seconds)
                    for label, figures_of in results.items():
                        name = "Mooncake's server" if baseline == "mooncake" else "reference"
                        print(
                            json.dumps(
                                {
                                    "figure": figure,
                                    "loop": loop,
                                    "server": label,
                                    "baseline": name,
                                    **figures_of,
                                }
                            ),
                            flush=True,
                        )
        finally:
            for process in processes:
                await stop_gracefully(process)
            if reference is not None:
                await reference.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--figure", default="mooncake-put,mooncake-get", help=f"of {', '.join(FIGURES)}")
    parser.add_argument("--loop", choices=LOOPS, default="installed", help="every server's loop")
    parser.add_argument("--rounds", type=int, default=7, help="rounds over every server (default: 7)")
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="seconds of wrk a figure a round (default: 2)"
    )
    parser.add_argument("--before", default="", help="also serve this checkout's aiobootstrap, in turn")
    parser.add_argument(
        "--after", default="", help="serve this checkout's aiobootstrap as after (default: this tree)"
    )
    arguments = parser.parse_args()
    chosen = [name for name in arguments.figure.split(",") if name]
    unknown = set(chosen) - set(FIGURES)
    if unknown:
        parser.error(f"unknown figures: {', '.join(sorted(unknown))}")
    asyncio.run(
        main(chosen, arguments.loop, arguments.rounds, arguments.seconds, arguments.before, arguments.after)
    )
