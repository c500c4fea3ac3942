"""Stopping: a stuck reader or an early signal never stretches or breaks the stop."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from aiobootstrap import BootstrapServer

from .conftest import GUARD, register_in


async def test_a_stuck_reader_delays_stopping_by_shutdown_timeout_at_most() -> None:
    """Stopping with a client that never reads takes shutdown_timeout in all, not twice it (SIGTERM exits in 2 s)."""
    timeout = 1.0
    server = BootstrapServer(port=0, shutdown_timeout=timeout)
    await server.start()
    await register_in(server.registry, 7, "big", {"blob": "x" * (4 << 20)})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /get_transfer_engine_info?rank=7 HTTP/1.1\r\nHost: x\r\n\r\n" * 8)
    await writer.drain()
    # The server is writing the replies; from here on the client reads nothing.
    await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        await asyncio.wait_for(server.close(), GUARD)
    finally:
        writer.close()
    # aiohttp spends its timeout twice on a stuck connection (graceful, then
    # cancelled) unless told otherwise: that would be at least 2 * timeout.
    assert loop.time() - started < 2 * timeout


_SIGNAL_DURING_START = """
import os, signal, sys
from aiobootstrap import _cli, _server
init = _server.BootstrapServer.__init__
def signal_then_init(self, *args, **kwargs):
    os.kill(os.getpid(), signal.SIG{name})
    init(self, *args, **kwargs)
_server.BootstrapServer.__init__ = signal_then_init
sys.exit(_cli.main(["--port", "0"]))
"""


@pytest.mark.parametrize("name", ["INT", "TERM"])
def test_a_signal_while_the_server_starts_is_an_orderly_stop(name: str) -> None:
    """SIGINT/SIGTERM arriving while the server starts: it stops as from a running server, exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", _SIGNAL_DURING_START.format(name=name)],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert (done.returncode, done.stderr.count("Traceback")) == (0, 0), done.stderr
    assert "stopping: answering parked waits and closing" in done.stderr
