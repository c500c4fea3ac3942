"""Starting and stopping the servers under test, each in its own process on loopback."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from ._wire import Target

__all__ = [
    "SERVERS",
    "RunningServer",
    "ServerKind",
    "cpu_clock_seconds",
    "cpu_seconds",
    "cpu_split",
    "preempted",
    "rss_kib",
    "stop_gracefully",
]

_START_TIMEOUT = 20.0
LOG_DIR = Path(__file__).parent / "results"


@dataclass(frozen=True, slots=True)
class ServerKind:
    """How to start one server variant."""

    name: str
    label: str
    argv: tuple[str, ...]
    banner: str = "aiobootstrap listening on "


_QUIET = ("--port", "0", "--log-level", "warning")

SERVERS = {
    kind.name: kind
    for kind in (
        ServerKind(
            "aiobootstrap", "aiobootstrap, orjson + uvloop (as installed)", ("-m", "aiobootstrap", *_QUIET)
        ),
        ServerKind(
            "plain",
            "aiobootstrap, stdlib json + asyncio loop",
            ("-m", "bench.plain", "--without", "orjson,uvloop", "--", *_QUIET),
        ),
        ServerKind(
            "orjson",
            "aiobootstrap, orjson + asyncio loop",
            ("-m", "bench.plain", "--without", "uvloop", "--", *_QUIET),
        ),
        ServerKind(
            "uvloop",
            "aiobootstrap, stdlib json + uvloop",
            ("-m", "bench.plain", "--without", "orjson", "--", *_QUIET),
        ),
        ServerKind(
            "reference",
            "reference (FastAPI + uvicorn thread)",
            ("-m", "bench.reference", "--port", "0"),
            banner="reference listening on ",
        ),
    )
}


def rss_kib(pid: int) -> dict[str, int]:
    """The process's resident set now (``VmRSS``) and at its peak (``VmHWM``), in KiB."""
    found: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0])
    return found


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time process ``pid`` has used, all threads (10 ms ticks)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU time process ``pid`` has used, all threads (10 ms ticks): where it went."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def preempted(pid: int) -> int:
    """How often the live threads of ``pid`` were switched out while runnable: others wanted its CPU."""
    total = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{thread}/status") as status:
            total += next(int(line.split()[1]) for line in status if line.startswith("nonvoluntary_ctxt"))
    return total


def cpu_clock_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used, all threads, to the nanosecond (the scheduler's own sum).

    :func:`cpu_seconds` counts 10 ms ticks: a figure of 15 ticks in a window is
    ±1 tick of noise at best. Linux's CPU clock of a process (the clock id
    ``clock_getcpuclockid`` returns: ``~pid << 3 | 2``) is the ``sum_exec_runtime``
    that ``/proc/PID/schedstat`` shows for one thread, summed over every thread
    the process has had; where it cannot be read, the live threads' schedstat.
    """
    try:
        return time.clock_gettime((~pid << 3) | 2)
    except OSError:
        return cpu_ns(pid) / 1e9


def cpu_ns(pid: int) -> int:
    """The CPU time of process ``pid``'s live threads in nanoseconds, read from their ``schedstat`` (what a
    thread is running up to now is in it: the figure for a wake-up of a few hundred µs)."""
    total = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{thread}/schedstat") as schedstat:
            total += int(schedstat.read().split()[0])
    return total


@dataclass
class RunningServer:
    kind: ServerKind
    process: asyncio.subprocess.Process
    url: str
    target: Target = field(init=False)

    def __post_init__(self) -> None:
        self.target = Target.from_url(self.url)

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss(self) -> int:
        return rss_kib(self.pid)["VmRSS"]

    def peak_rss(self) -> int:
        return rss_kib(self.pid)["VmHWM"]

    def cpu_seconds(self) -> float:
        """User plus system CPU time the server has used, all threads (10 ms ticks)."""
        return cpu_seconds(self.pid)

    def cpu_clock_seconds(self) -> float:
        """The CPU time the server has used, all threads, to the nanosecond (:func:`cpu_clock_seconds`)."""
        return cpu_clock_seconds(self.pid)

    def cpu_split(self) -> tuple[float, float]:
        """User and system CPU time the server has used (:func:`cpu_split`)."""
        return cpu_split(self.pid)

    def preempted(self) -> int:
        """How often the server's threads were switched out while runnable (:func:`preempted`)."""
        return preempted(self.pid)

    @classmethod
    async def start(cls, kind: ServerKind, *options: str) -> RunningServer:
        """Start ``kind`` with extra command-line ``options`` and wait for its listening line."""
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        # A file, not a pipe nobody reads: a chatty server must never block on stderr.
        log = open(LOG_DIR / f"{kind.name}.log", "ab")  # noqa: SIM115, ASYNC230 - once, before the child starts
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *kind.argv,
            *options,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env=env,
        )
        assert process.stdout is not None
        try:
            async with asyncio.timeout(_START_TIMEOUT):
                while True:
                    line = (await process.stdout.readline()).decode()
                    if not line:
                        raise RuntimeError(f"{kind.label} exited before listening")
                    if line.startswith(kind.banner):
                        url = line[len(kind.banner) :].strip()
                        break
        except BaseException:
            log.close()
            process.kill()
            await process.wait()
            raise
        log.close()  # the child has its own descriptor
        return cls(kind, process, url)

    async def stop(self) -> None:
        await stop_gracefully(self.process)

    async def __aenter__(self) -> RunningServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def stop_gracefully(process: asyncio.subprocess.Process, timeout: float = 10.0) -> None:
    """``SIGTERM``, as an operator stops a server (a profiled one writes its profile then); ``SIGKILL`` after
    ``timeout`` s."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(timeout):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


async def start_in_tree(
    label: str, tree: Path, argv: list[str], banner: str, *, log: str, env: dict[str, str] | None = None
) -> tuple[asyncio.subprocess.Process, str]:
    """``python ARGV`` run in ``tree`` (its working directory comes first on ``sys.path``, so the server
    imports that tree's aiobootstrap), stderr appended to ``results/LOG-LABEL.log``; the process and the
    URL its ``banner`` line names, once it listens."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    errors = open(LOG_DIR / f"{log}-{label}.log", "ab")  # noqa: SIM115, ASYNC230 - once, before the child starts
    process = await asyncio.create_subprocess_exec(
        sys.executable, *argv, cwd=tree, env=env, stdout=asyncio.subprocess.PIPE, stderr=errors
    )
    errors.close()
    assert process.stdout is not None
    async with asyncio.timeout(20):
        while True:
            line = (await process.stdout.readline()).decode()
            if not line:
                raise RuntimeError(f"{label} exited before listening")
            if line.startswith(banner):
                return process, line[len(banner) :].strip()


async def serve_in_process(app: web.Application) -> tuple[web.AppRunner, int]:
    """``app`` on a free loopback port in this process, with the CLI's runner options: the runner and the port."""
    runner = web.AppRunner(app, handle_signals=False, handler_cancellation=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, runner.addresses[0][1]
