"""``wrk``, a load generator in C, for the throughput scenarios when it is installed.

The Python load generator (``_load``) shares the machine's two cores with the
server it measures, and building or reading 60 KB bodies costs it as much as
the server spends on them. ``wrk`` (Debian's package) costs a fraction of
that: one thread of it, 64 keep-alive connections. Bodies are written to
files that a Lua script reads once and turns into pre-formatted requests;
``done`` prints the summary as one JSON line, so nothing here parses wrk's
human-readable output.
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ._wire import Target

__all__ = ["WrkResult", "find_wrk", "run_wrk"]

_MARK = "WRKJSON "

_SCRIPT = """
local dir, count, method, path = "{dir}", {count}, "{method}", "{path}"
local requests = {{}}
local index = 0

init = function(args)
  for i = 0, count - 1 do
    local body = nil
    if method ~= "GET" then
      local file = assert(io.open(dir .. "/body" .. i, "rb"))
      body = file:read("*a")
      file:close()
    end
    requests[i + 1] = wrk.format(method, path, {{["Content-Type"] = "application/json"}}, body)
  end
end

request = function()
  index = index % count + 1
  return requests[index]
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{mark}{{"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, '
    .. '"status": %d, "connect": %d, "read": %d, "write": %d, "timeout": %d}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.status, e.connect, e.read, e.write, e.timeout))
end
"""


@dataclass(frozen=True, slots=True)
class WrkResult:
    requests: int
    seconds: float
    p50: float
    p99: float
    errors: dict[str, int]
    """Replies not 2xx/3xx (``status``), and socket errors, by kind."""

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def find_wrk() -> str | None:
    """The path of ``wrk`` with its version line, or ``None`` when it is not installed."""
    path = shutil.which("wrk")
    if path is None:
        return None
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    first = (version.stdout or version.stderr).splitlines()
    return f"{path} ({first[0].split(' Copyright')[0].strip()})" if first else path


def _write_script(directory: Path, path: str, bodies: list[bytes] | None, method: str) -> Path:
    """The Lua script, and each body in a file of its own, in ``directory``."""
    for index, body in enumerate(bodies or []):
        (directory / f"body{index}").write_bytes(body)
    script = directory / "load.lua"
    script.write_text(
        _SCRIPT.format(
            dir=directory,
            count=len(bodies) if bodies else 1,
            method=method if bodies else "GET",
            path=path,
            mark=_MARK,
        )
    )
    return script


async def run_wrk(
    target: Target,
    path: str,
    bodies: list[bytes] | None = None,
    *,
    connections: int = 64,
    seconds: float = 2.0,
    threads: int = 1,
    method: str = "PUT",
) -> WrkResult:
    """``wrk`` against ``target``: GETs of ``path``, or ``method`` requests (PUT, or vLLM's POST) of ``bodies``
    in turn."""
    wrk = shutil.which("wrk")
    if wrk is None:
        raise RuntimeError("wrk is not installed")
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as directory:
        script = _write_script(Path(directory), path, bodies, method)
        process = await asyncio.create_subprocess_exec(
            wrk,
            f"-t{threads}",
            f"-c{connections}",
            f"-d{max(1, math.ceil(seconds))}s",  # whole seconds: wrk reads no fractions
            "--timeout",
            "10s",
            "-s",
            str(script),
            f"http://{target.host}:{target.port}",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
    lines = [line for line in out.decode().splitlines() if line.startswith(_MARK)]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({process.returncode}): {err.decode()[-500:]}")
    summary = json.loads(lines[-1][len(_MARK) :])
    errors = {name: summary[name] for name in ("status", "connect", "read", "write", "timeout")}
    return WrkResult(
        summary["requests"],
        summary["duration_us"] / 1e6,
        summary["p50_us"] / 1e6,
        summary["p99_us"] / 1e6,
        errors,
    )
