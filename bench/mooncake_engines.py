"""A Mooncake transfer engine's own timings through each metadata server: ``initialize`` and its first write
to a peer (which looks the peer's descriptor up) beside its second write (which does not).

Two real engines (the ``mooncake-transfer-engine-non-cuda`` wheel, TCP transport, each in a process of
its own) per run, against Mooncake's own ``http_metadata_server`` and aiobootstrap's memory and file
stores, the servers' runs taking turns; medians of ``--runs`` runs (9 by default), milliseconds.

``python -m bench.mooncake_engines``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from typing import Any

from ._servers import SERVERS, RunningServer
from .mooncake import mooncake_server

# The engine, timed from inside its process (perf_counter around the wheel's calls): no pipe in the figure.
_ENGINE = """
import json, socket, sys, time
from mooncake.engine import TransferEngine
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); name = "127.0.0.1:%d" % s.getsockname()[1]
engine = TransferEngine()
start = time.perf_counter()
if engine.initialize(name, sys.argv[1], "tcp", "") != 0:
    print(json.dumps({"error": "initialize failed"}), flush=True); sys.exit(1)
initialize = time.perf_counter() - start
buffer = engine.allocate_managed_buffer(4096)
print(json.dumps({"name": name, "buffer": buffer, "initialize": initialize}), flush=True)
for line in sys.stdin:
    peer, address = line.split()
    times = []
    for _ in range(2):
        start = time.perf_counter()
        result = engine.transfer_sync_write(peer, buffer, int(address), 64)
        times.append(time.perf_counter() - start)
    print(json.dumps({"result": result, "first": times[0], "second": times[1]}), flush=True)
"""


async def start_engine(
    metadata: str, stderr: Any = asyncio.subprocess.DEVNULL
) -> tuple[asyncio.subprocess.Process, dict[str, Any]]:
    """One engine (``_ENGINE``) in a process of its own, its log to ``stderr``; the process and its first line."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _ENGINE,
        metadata,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
    )
    assert process.stdout is not None
    line = json.loads(await process.stdout.readline() or b'{"error": "the engine exited"}')
    if "error" in line:
        raise RuntimeError(line["error"])
    return process, line


async def _close(process: asyncio.subprocess.Process) -> None:
    assert process.stdin is not None
    process.stdin.close()  # a normal exit: the engine deletes its keys
    await process.wait()


async def one_run(metadata: str) -> dict[str, float]:
    """Milliseconds: the second engine's ``initialize``, its first and its second write to the first."""
    target, told = await start_engine(metadata)
    try:
        writer, own = await start_engine(metadata)
        try:
            assert writer.stdin is not None
            assert writer.stdout is not None
            writer.stdin.write(f"{told['name']} {told['buffer']}\n".encode())
            await writer.stdin.drain()
            wrote = json.loads(await writer.stdout.readline())
            if wrote["result"] != 0:
                raise RuntimeError(f"the write failed: {wrote}")
        finally:
            await _close(writer)
    finally:
        await _close(target)
    return {
        "initialize": own["initialize"] * 1e3,
        "first": wrote["first"] * 1e3,
        "second": wrote["second"] * 1e3,
    }


async def main(runs: int) -> None:
    # The servers' runs take turns: the machine's other load falls on each alike.
    found: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-mooncake-") as directory:
        async with mooncake_server() as target:
            urls = {"mooncake.http_metadata_server": f"http://{target.host}:{target.port}"}
            servers = []
            try:
                for label, store in (
                    ("aiobootstrap memory:", "memory:"),
                    ("aiobootstrap file:", f"file:{directory}/s"),
                ):
                    servers.append(await RunningServer.start(SERVERS["aiobootstrap"], "--store", store))
                    urls[label] = servers[-1].url
                for _ in range(runs):
                    for label, url in urls.items():
                        found.setdefault(label, []).append(await one_run(f"{url}/metadata"))
            finally:
                for server in servers:
                    await server.stop()
    for label, results in found.items():
        figures = {
            f"{name} ms p50": round(statistics.median(r[name] for r in results), 2) for name in results[0]
        }
        print(json.dumps({"server": label, **figures}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=9, help="engine pairs per server (default: 9)")
    asyncio.run(main(parser.parse_args().runs))
