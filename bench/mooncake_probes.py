"""Mooncake probes against real engines: a live engine probed every 0.3 s keeps transferring and logs nothing
about the probes, and a SIGKILLed engine's keys leave.

aiobootstrap (``--mooncake-probe-interval 0.3``) and two TCP transfer engines from the wheel, each in a
process of its own; the second writes 64 bytes to the first every 0.5 s for ``--seconds`` (60). Printed:
the writes and their failures, the warning and error lines each engine logged once initialized (glog's ``W``/``E`` lines),
then the seconds from the first engine's SIGKILL to its ``rpc_meta`` key's ``404``.

``python -m bench.mooncake_probes``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from ._servers import SERVERS, RunningServer
from .mooncake_engines import start_engine


async def _engine(metadata: str, log: Path) -> tuple[asyncio.subprocess.Process, dict[str, Any]]:
    with log.open("wb") as errors:
        return await start_engine(metadata, errors)


def _warnings(log: Path, start: int) -> list[str]:
    """The W/E lines logged past ``start`` bytes: what initialize logs (its own 404 for its old
    descriptor, no RDMA device) is the same through any server, and comes before."""
    with log.open("rb") as text:
        text.seek(start)
        lines = text.read().decode(errors="replace").splitlines()
    return [line for line in lines if line[:1] in "WE"]


async def main(seconds: float) -> None:
    server = await RunningServer.start(SERVERS["aiobootstrap"], "--mooncake-probe-interval", "0.3")
    with tempfile.TemporaryDirectory(prefix="bench-mooncake-") as directory:
        logs = Path(directory) / "target.log", Path(directory) / "writer.log"
        metadata = f"{server.url}/metadata"
        target, told = await _engine(metadata, logs[0])
        writer, _ = await _engine(metadata, logs[1])
        starts = logs[0].stat().st_size, logs[1].stat().st_size
        assert writer.stdin is not None
        assert writer.stdout is not None
        writes = failed = 0
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            writer.stdin.write(f"{told['name']} {told['buffer']}\n".encode())
            await writer.stdin.drain()
            wrote = json.loads(await writer.stdout.readline())
            writes, failed = writes + 2, failed + (wrote["result"] != 0)
            await asyncio.sleep(0.5)
        writer.stdin.close()
        await writer.wait()
        target.kill()
        killed = time.monotonic()
        await target.wait()
        url = f"{server.url}/metadata?key=" + quote(f"mooncake/rpc_meta/{told['name']}", safe="")
        async with aiohttp.ClientSession() as http:
            while True:
                async with http.get(url, params={"wait": "0"}) as reply:
                    if reply.status == 404:
                        break
                await asyncio.sleep(0.05)
        gone = time.monotonic() - killed
        print(json.dumps({
            "seconds probed every 0.3 s": seconds, "writes": writes, "failed write rounds": failed,
            "target engine W/E lines": _warnings(logs[0], starts[0]),
            "writer engine W/E lines": _warnings(logs[1], starts[1]),
            "killed engine's rpc_meta gone after s": round(gone, 2),
        }))  # fmt: skip
    await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="seconds of writes under probes (default: 60)"
    )
    asyncio.run(main(parser.parse_args().seconds))
