"""Soak figures of the client and the log under faults: a client against a bad server, a bad request line's log.

Two sections of ``bench.soak``:

``client``    servers of this module's own that hold a request and never answer, drip a
              byte every 5 s, stream a chunked reply for ever, or send a 1 GiB reply; a
              client process times ``get(timeout=T)`` (and ``register(timeout=T)``
              against the first two): seconds past its timeout, what it raised, and its
              peak RSS. A call still running at the guard is killed and shown as such.
``badlines``  N malformed request lines (issue 18's: ``GET /health?`` and 8,100 ``\\x01``),
              sent by a few connections as fast as the server answers them: bytes of
              log written per line, at the default log level.

Each figure comes from a subprocess (a client, or ``python -m aiobootstrap``) run
from a temporary directory, so ``--before-path DIR`` (an older tree's sources, say
``git archive f964acf | tar -x -C DIR``) puts that tree first on ``PYTHONPATH``
for a "before" column beside this tree's "after".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

__all__ = ["bad_line_rows", "client_rows"]

Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

_PROBE = """
import asyncio, json, resource, sys, time
from aiobootstrap import BootstrapClient

async def main(url, call, timeout):
    async with BootstrapClient(url) as client:
        start = time.perf_counter()
        try:
            if call == "get":
                await client.get(3, timeout=timeout)
            else:
                await client.register(3, session_id="s", weights_info_dict={}, timeout=timeout)
            outcome = "returned"
        except Exception as exc:
            outcome = type(exc).__name__
        seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "outcome": outcome, "rss_kib": rss}))

asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
"""
"""The client of one figure: one call against ``URL``, its time, what it raised, its peak RSS."""

_BAD_LINE = b"GET /health?" + b"\x01" * 8100 + b" HTTP/1.1\r\nHost: x\r\n\r\n"


def _env(path: str | None) -> dict[str, str] | None:
    """The environment of a subprocess of the tree at ``path`` (``None``: this tree)."""
    if path is None:
        return None
    return {**os.environ, "PYTHONPATH": path}


# -- servers that misbehave ---------------------------------------------------


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while await reader.read(65536):
        pass


async def _drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
    while True:
        writer.write(b" ")
        await writer.drain()
        await asyncio.sleep(5.0)


async def _endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    while True:
        writer.write(b"400\r\n" + b" " * 1024 + b"\r\n")
        await writer.drain()
        await asyncio.sleep(0.01)


async def _gigabyte(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    size = 1 << 30
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % size)
    block = b" " * (1 << 20)
    for _ in range(size // len(block)):
        writer.write(block)
        await writer.drain()


_BEHAVIOURS: dict[str, Behaviour] = {
    "never answers": _silent,
    "1 byte every 5 s": _drip,
    "endless chunked body": _endless,
    "1 GiB reply": _gigabyte,
}
_CALLS = {"never answers": ("get", "register"), "1 byte every 5 s": ("get", "register")}


@contextlib.asynccontextmanager
async def _bad_server(behave: Behaviour) -> AsyncIterator[str]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            await behave(reader, writer)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        # Not wait_closed: on 3.12 it waits for the handlers, and each ends only when its client has gone.
        server.close()


async def _probe(url: str, call: str, timeout: float, guard: float, path: str | None) -> str:
    """One client call in a subprocess: seconds past ``timeout``, what it raised, peak RSS."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _PROBE, url, call, str(timeout),
        stdout=asyncio.subprocess.PIPE, env=_env(path), cwd=tempfile.gettempdir(),
    )  # fmt: skip
    try:
        async with asyncio.timeout(guard):
            out, _ = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return f"still running at {guard - timeout:.0f} s past (killed)"
    figure = json.loads(out)
    return f"{figure['seconds'] - timeout:+.2f} s ({figure['outcome']}; peak RSS {figure['rss_kib'] / 1024:.0f} MiB)"


async def client_rows(timeout: float, guard: float, before: str | None) -> list[list[object]]:
    """One row per bad server and call: the client's time past its timeout, before and after."""
    rows: list[list[object]] = []
    for name, behave in _BEHAVIOURS.items():
        for call in _CALLS.get(name, ("get",)):
            async with _bad_server(behave) as url:
                cells = [await _probe(url, call, timeout, guard, None)]
                if before is not None:
                    cells.insert(0, await _probe(url, call, timeout, guard, before))
            rows.append([name, f"{call}(timeout={timeout:g})", *cells])
    return rows


# -- bad request lines ------------------------------------------------------------


async def _log_bytes(lines: int, connections: int, path: str | None) -> tuple[float, float]:
    """Send ``lines`` bad request lines to a fresh server; (log bytes per line, lines a second)."""
    with tempfile.TemporaryFile() as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aiobootstrap", "--port", "0",
            stdout=asyncio.subprocess.PIPE, stderr=log, env=_env(path), cwd=tempfile.gettempdir(),
        )  # fmt: skip
        assert proc.stdout is not None
        line = (await proc.stdout.readline()).decode()
        host, _, port = line.split()[-1].removeprefix("http://").rpartition(":")
        await asyncio.sleep(0.5)  # the start-up lines written
        start_size = os.fstat(log.fileno()).st_size
        left = [lines]

        async def sender() -> None:
            while left[0] > 0:
                left[0] -= 1
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(_BAD_LINE)
                await reader.read()
                writer.close()

        start = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(connections)))
        elapsed = time.perf_counter() - start
        await asyncio.sleep(0.5)  # the last lines written
        size = os.fstat(log.fileno()).st_size - start_size
        proc.terminate()
        await proc.wait()
    return size / lines, lines / elapsed


async def bad_line_rows(lines: int, before: str | None) -> list[list[object]]:
    trees = {"before": before, "after": None} if before is not None else {"": None}
    rows: list[list[object]] = []
    for tree, path in trees.items():
        per_line, rate = await _log_bytes(lines, 8, path)
        rows.append([*([tree] if before else []), f"{lines:,}", f"{rate:,.0f}", f"{per_line:,.1f}"])
    return rows


def sources(path: str | None) -> str | None:
    """``path`` made absolute, checked to hold a package (``None`` stays ``None``)."""
    if path is None:
        return None
    root = Path(path).resolve()
    if not (root / "aiobootstrap" / "__init__.py").is_file():
        raise SystemExit(f"--before-path {path}: no aiobootstrap package there")
    return str(root)
