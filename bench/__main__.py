"""``python -m bench [--quick]``: run every scenario, print the table, write the docs."""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiobootstrap.cli.main import loop_factory
from aiobootstrap.server.open_files import raise_open_file_limit

from . import _replicas, _report, _scenarios
from ._scenarios import Settings

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SCENARIOS: dict[str, Callable[[Settings], Awaitable[dict[str, Any]]]] = {
    "wake": _scenarios.wake,
    "throughput": _scenarios.throughput,
    "broadcast": _scenarios.broadcast,
    "gather": _scenarios.gather,
    "big_payload": _scenarios.big_payload,
    "hundred_k": _scenarios.hundred_k,
    "codec": _scenarios.codec,
    "replicas": _replicas.replicas,
}


async def run(settings: Settings, only: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in only:
        print(f"-- {name} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        results[name] = await SCENARIOS[name](settings)
        print(f"   {name} took {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="CI-sized run, well under a minute; prints, leaves docs/ alone"
    )
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios to run")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    parser.add_argument(
        "--python-load",
        action="store_true",
        help="throughput with the Python load generator even when wrk is installed",
    )
    parser.add_argument(
        "--render", action="store_true", help="measure nothing: rewrite the docs from bench/results/last.json"
    )
    args = parser.parse_args()
    if args.render:
        return _render()
    only = [name for name in args.only.split(",") if name]
    unknown = set(only) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    settings = (Settings.quick_run if args.quick else Settings.full)(args.python_load)
    # The lean waiters hold one socket each: 4,096 parked waiters need as many descriptors.
    raise_open_file_limit()
    started = time.perf_counter()
    # The load generator runs on uvloop too: it must outrun the servers it measures.
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        results = runner.run(run(settings, only))
    meta = {
        "command": "make bench" + (" BENCH_ARGS=--quick" if args.quick else ""),
        "quick": args.quick,
        "seconds": round(time.perf_counter() - started, 1),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "python": platform.python_version(),
        "machine": _report.machine(),
    }
    figures = _report.figures(results)
    print(_report.table(figures))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / ("last-quick.json" if args.quick else "last.json")).write_text(
        json.dumps({"meta": meta, "results": results}, indent=1)
    )
    # Only a whole full run stands for the figures in the docs.
    if not args.no_write and not args.quick and set(only) == set(SCENARIOS):
        _report.write_docs(ROOT / "docs", meta, results, figures)
        print(f"wrote {ROOT / 'docs' / 'benchmarks.md'} and the plot", file=sys.stderr)
    return 0


def _render() -> int:
    saved = json.loads((RESULTS / "last.json").read_text())
    results = saved["results"]
    if "wake" in results:  # JSON made the crowd sizes strings
        for mode in ("long_poll", "polling"):
            results["wake"][mode] = {int(k): v for k, v in results["wake"][mode].items()}
    figures = _report.figures(results)
    print(_report.table(figures))
    _report.write_docs(ROOT / "docs", saved["meta"], results, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
