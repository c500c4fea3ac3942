"""vLLM's Mooncake connector bootstrap, side by side with vLLM's own ``MooncakeBootstrapServer``.

vLLM's server is vLLM 0.33's own code, run the way vLLM runs it: ``mooncake_utils.py`` from the
release's wheel (``pip download --no-deps vllm==V``, V from ``compat/engines.txt``, cached under
``~/.cache/aiobootstrap/``; only that file is kept), its two vLLM imports (``EngineId``, ``init_logger``)
given as two stub names, and ``MooncakeBootstrapServer("127.0.0.1", 0).start()``: FastAPI under uvicorn in
a daemon thread of a process of its own, uvicorn's defaults (uvloop, httptools, its access log, written
to ``/dev/null``). aiobootstrap runs as ``python -m aiobootstrap`` in a process of its own.

Three figures:

- **``GET /query`` of a 64-worker deployment** (8 dp ranks of 8 tp ranks) under ``wrk -t1 -c64``:
  requests a second, the paired ratio round by round;
- **``POST /register``** under ``wrk -t1 -c64``: the 64 workers registered again, as a worker's retry
  does (the only ``200`` vLLM's server gives a registered worker), and on aiobootstrap also each at
  a new address in turn (a restarted worker: a write and a change on ``/watch``; vLLM's ``400``);
- **a proxy learns a complete deployment**: the milliseconds from the last worker's ``200`` to the
  proxy's complete answer, the proxy waiting (``GET /query?wait=60&tp_size=8``) on aiobootstrap, and
  polling vLLM's server once a second (at a random phase) until the dp rank has its 8 tp ranks.

``python -m bench.vllm`` (``--quick``: fewer runs; ``--only query,register,learn``; ``--rounds N``;
``--seconds S`` of wrk per figure). ``python -m bench.vllm --serve-vllm`` serves vLLM's server alone
and prints ``vllm listening on http://HOST:PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import types
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from ._servers import SERVERS, RunningServer, ServerKind, cpu_clock_seconds
from ._wire import Target
from ._wrk import WrkResult, find_wrk
from ._wrk import run_wrk as run_any_wrk

ROOT = Path(__file__).resolve().parent.parent
_MODULE = "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_utils.py"
_STUBS: dict[str, dict[str, Any]] = {
    "vllm.distributed.kv_transfer.kv_connector.utils": {"EngineId": str},
    "vllm.logger": {"init_logger": logging.getLogger},
}
"""The two names ``mooncake_utils`` imports from the rest of vLLM (whose import chain needs torch): vLLM's
``EngineId`` is ``str``; its ``init_logger(name)`` gives a ``logging.Logger``."""
VLLM = ServerKind(
    "vllm",
    "vLLM's MooncakeBootstrapServer (FastAPI + uvicorn thread)",
    ("-m", "bench.vllm", "--serve-vllm"),
    banner="vllm listening on ",
)
DP, TP = 8, 8
"""The deployment measured: 8 dp ranks of 8 tp ranks (one pp rank), 64 workers."""


def vllm_version() -> str:
    """The vLLM release ``make compat`` checks (``compat/engines.txt``), else 0.33.0."""
    with contextlib.suppress(OSError):
        for line in (ROOT / "compat" / "engines.txt").read_text().splitlines():
            if line.startswith("vllm=="):
                return line.split("==", 1)[1].strip()
    return "0.33.0"


def vllm_source(version: str) -> Path:
    """vLLM ``version``'s ``mooncake_utils.py``: from the cache, else taken from the release's wheel (downloaded
    with pip, without its dependencies; the wheel is deleted once the one file is out)."""
    cache = (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aiobootstrap" / f"vllm-{version}"
    )
    source = cache / "mooncake_utils.py"
    if source.exists():
        return source
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-vllm-", dir=cache) as directory:
        print(f"bench.vllm: downloading vllm=={version} (about 340 MB, once)", file=sys.stderr, flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"vllm=={version}", "-d", directory],
            check=True,
        )
        (wheel,) = Path(directory).glob("vllm-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            (source.with_suffix(".tmp")).write_bytes(archive.read(_MODULE))
        source.with_suffix(".tmp").replace(source)
    return source


def load_vllm_server(version: str | None = None) -> type[Any]:
    """vLLM's ``MooncakeBootstrapServer`` class, its module imported from the release's own file with the two
    stub names in ``sys.modules`` (nothing of vLLM's is copied here)."""
    for name, attributes in _STUBS.items():
        parts = name.split(".")
        for depth in range(1, len(parts)):
            package = ".".join(parts[:depth])
            if package not in sys.modules:
                module = types.ModuleType(package)
                module.__path__ = []
                sys.modules[package] = module
        if name not in sys.modules:
            stub = types.ModuleType(name)
            for attribute, value in attributes.items():
                setattr(stub, attribute, value)
            sys.modules[name] = stub
    spec = importlib.util.spec_from_file_location(
        "vllm_mooncake_utils", vllm_source(version or vllm_version())
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server: type[Any] = module.MooncakeBootstrapServer
    return server


def serve_vllm() -> None:
    """vLLM's server as vLLM starts it, on a free loopback port, until ``SIGTERM``."""
    server = load_vllm_server()("127.0.0.1", 0)
    server.start()
    print(f"{VLLM.banner}http://127.0.0.1:{server.port}", flush=True)
    # uvicorn's access log goes to stdout, as in vLLM; here to /dev/null, not a pipe nobody reads.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    server.shutdown()


# -- the deployment ----------------------------------------------------------------------------


def worker(dp: int, tp: int, *, engine: str = "", port: int = 0) -> dict[str, Any]:
    """A worker's ``/register`` body as vLLM's ``register_worker_with_bootstrap`` sends it."""
    return {
        "engine_id": engine or f"{uuid.UUID(int=dp + 1)}_dp{dp}",
        "dp_rank": dp,
        "tp_rank": tp,
        "pp_rank": 0,
        "addr": f"tcp://10.0.{dp}.{tp}:{port or 40000 + tp}",
    }


async def register_deployment(http: aiohttp.ClientSession, base: str) -> None:
    """The 64 workers, each ``200``."""
    for dp in range(DP):
        for tp in range(TP):
            async with http.post(f"{base}/register", json=worker(dp, tp)) as reply:
                if reply.status != 200:
                    raise RuntimeError(f"{base}/register answered {reply.status}: {await reply.text()}")


async def run_wrk(target: Target, path: str, bodies: list[bytes] | None, seconds: float) -> WrkResult:
    """``wrk -t1 -c64`` against ``target``: GETs of ``path``, or POSTs of ``bodies`` in turn."""
    return await run_any_wrk(target, path, bodies, seconds=seconds, method="POST")


def same_again() -> list[bytes]:
    """The 64 workers' registrations as they were made: a retry of each."""
    return [json.dumps(worker(dp, tp)).encode() for dp in range(DP) for tp in range(TP)]


def moving() -> list[bytes]:
    """Each of the 64 workers at a new address each time it comes round (two addresses in turn)."""
    return [
        json.dumps(worker(dp, tp, port=50000 + 1000 * turn + tp)).encode()
        for turn in range(2)
        for dp in range(DP)
        for tp in range(TP)
    ]


@dataclass(frozen=True)
class Load:
    """One server under one load: where it listens, its process (whose CPU is read), the bodies it is sent."""

    target: Target
    pid: int
    bodies: list[bytes] | None = None


@dataclass(frozen=True)
class Run:
    wrk: WrkResult
    cpu: float
    """The server's CPU seconds over the run (all its threads)."""

    @property
    def per_cpu(self) -> float:
        """Requests per CPU second of the server: the figure least moved by a busy machine."""
        return self.wrk.requests / self.cpu if self.cpu else 0.0


async def wrk_in_turn(loads: dict[str, Load], path: str, rounds: int, seconds: float) -> dict[str, list[Run]]:
    """Each load under wrk, ``rounds`` times, the order reversed every other round."""
    results: dict[str, list[Run]] = {name: [] for name in loads}
    for index in range(rounds):
        order = list(loads.items()) if index % 2 == 0 else list(loads.items())[::-1]
        for name, load in order:
            before = cpu_clock_seconds(load.pid)
            result = await run_wrk(load.target, path, load.bodies, seconds)
            cpu = cpu_clock_seconds(load.pid) - before
            if result.errors.get("status") or result.requests == 0:
                raise RuntimeError(f"{name}: {path} under wrk: {result.errors}")
            results[name].append(Run(result, cpu))
    return results


def print_rates(figure: str, results: dict[str, list[Run]], base: str) -> dict[str, Any]:
    """Medians of each load's rate, p99 and requests per server CPU second, and the paired ratios (round by
    round) of each to ``base``'s."""
    line: dict[str, Any] = {"figure": figure, "rounds": len(results[base])}
    for name, runs in results.items():
        line[f"{name} /s"] = round(statistics.median(run.wrk.rate for run in runs))
        line[f"{name} p99 ms"] = round(statistics.median(run.wrk.p99 for run in runs) * 1000, 2)
        line[f"{name} per CPU s"] = round(statistics.median(run.per_cpu for run in runs))
    for name, runs in results.items():
        if name != base:
            paired = [
                ours.wrk.rate / theirs.wrk.rate for ours, theirs in zip(runs, results[base], strict=True)
            ]
            line[f"{name} / {base}, paired"] = round(statistics.median(paired), 2)
            line[f"{name} / {base}, range"] = [round(min(paired), 2), round(max(paired), 2)]
            per_cpu = [
                ours.per_cpu / theirs.per_cpu for ours, theirs in zip(runs, results[base], strict=True)
            ]
            line[f"{name} / {base}, per CPU s, paired"] = round(statistics.median(per_cpu), 2)
    print(json.dumps(line), flush=True)
    return line


# -- a proxy learns the deployment -----------------------------------------------------------------


async def learn(http: aiohttp.ClientSession, base: str, dp: int, *, waiting: bool) -> float:
    """Seconds from the last of dp rank ``dp``'s workers' ``200`` to the proxy's complete answer: waiting on
    aiobootstrap (``wait=&tp_size=``, in a namespace of its own), or polling once a second."""
    for tp in range(TP - 1):
        async with http.post(f"{base}/register", json=worker(dp, tp)) as reply:
            assert reply.status == 200, await reply.text()
    answered: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    async def proxy() -> None:
        if waiting:
            async with http.get(f"{base}/query?wait=60&tp_size={TP}") as reply:
                assert reply.status == 200, await reply.text()
                assert len((await reply.json())[str(dp)]["worker_addr"]) == TP
        else:
            await asyncio.sleep(random.random())  # the proxy's phase
            while True:
                async with http.get(f"{base}/query") as reply:
                    entry = (await reply.json()).get(str(dp))
                if entry is not None and len(entry["worker_addr"]) == TP:
                    break
                await asyncio.sleep(1.0)
        answered.set_result(time.perf_counter())

    task = asyncio.create_task(proxy())
    await asyncio.sleep(0.05)  # parked (or polling)
    async with http.post(f"{base}/register", json=worker(dp, TP - 1)) as reply:
        await reply.read()
        registered = time.perf_counter()
    done = await answered
    await task
    return done - registered


FIGURES = ("query", "register", "learn")


async def main(quick: bool, only: set[str], rounds: int, seconds: float) -> None:
    runs = 6 if quick else 20
    ours = await RunningServer.start(SERVERS["aiobootstrap"])
    theirs = await RunningServer.start(VLLM)
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            for base in (ours.url, theirs.url):
                await register_deployment(http, base)
            if find_wrk() is None:
                print("wrk is not installed (Debian's package wrk): no throughput figures", file=sys.stderr)
            else:
                if "query" in only:
                    loads = {
                        "aiobootstrap": Load(ours.target, ours.pid),
                        "vllm": Load(theirs.target, theirs.pid),
                    }
                    results = await wrk_in_turn(loads, "/query", rounds, seconds)
                    print_rates(f"GET /query, {DP * TP} workers, wrk -t1 -c64", results, "vllm")
                if "register" in only:
                    loads = {
                        "aiobootstrap": Load(ours.target, ours.pid, same_again()),
                        "vllm": Load(theirs.target, theirs.pid, same_again()),
                        "aiobootstrap, each at a new address": Load(ours.target, ours.pid, moving()),
                    }
                    results = await wrk_in_turn(loads, "/register", rounds, seconds)
                    print_rates("POST /register of the 64 workers, wrk -t1 -c64", results, "vllm")
            if "learn" in only:
                # Each run a dp rank of its own past the deployment's (one namespace per run on aiobootstrap).
                waited = [
                    await learn(http, f"{ours.url}/ns/learn{run}", DP + run, waiting=True)
                    for run in range(runs)
                ]
                polled = [await learn(http, theirs.url, DP + run, waiting=False) for run in range(runs)]
                print(json.dumps({
                    "figure": "a proxy learns a complete deployment (ms from the last worker's 200)", "runs": runs,
                    "aiobootstrap wait= p50": round(statistics.median(waited) * 1000, 2),
                    "max": round(max(waited) * 1000, 2),
                    "vllm polled 1/s p50": round(statistics.median(polled) * 1000, 1),
                    "max ": round(max(polled) * 1000, 1),
                }), flush=True)  # fmt: skip
    finally:
        await ours.stop()
        await theirs.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--serve-vllm", action="store_true", help="serve vLLM's server alone, until SIGTERM")
    parser.add_argument("--quick", action="store_true", help="fewer runs of the proxy figure")
    parser.add_argument(
        "--only", default=",".join(FIGURES), help=f"a comma-separated subset of {', '.join(FIGURES)}"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of each wrk figure, in turn (default: 3)"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of wrk per figure (default: 3)")
    args = parser.parse_args()
    if args.serve_vllm:
        serve_vllm()
        raise SystemExit(0)
    chosen = set(args.only.split(","))
    if chosen - set(FIGURES):
        parser.error(
            f"--only names {', '.join(sorted(chosen - set(FIGURES)))}: not one of {', '.join(FIGURES)}"
        )
    asyncio.run(main(args.quick, chosen, args.rounds, args.seconds))
