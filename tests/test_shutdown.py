"""Stopping: parked waits answered 503 at once, a stuck reader or an early signal never stretches or breaks the stop."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys

import aiohttp
import pytest

from aiobootstrap import BootstrapServer
from aiobootstrap._names import BOOT_HEADER
from aiobootstrap.exceptions import SHUTTING_DOWN_DETAIL, ShuttingDown

from .helpers.cli import serve
from .helpers.registry import info_key, register_in
from .helpers.waits import GUARD, until


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
from aiobootstrap.cli import main as _cli
from aiobootstrap.server import server as _server
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


# -- parked waits at a stop: answered with ready-made bytes ----------------

_PARKED_REQUESTS = [
    "GET /get_transfer_engine_info?rank={n}&wait=60 HTTP/1.1\r\nHost: x\r\n\r\n",
    "HEAD /get_transfer_engine_info?rank={n}&wait=60 HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /get_transfer_engine_info?rank={n}&wait=60 HTTP/1.0\r\n\r\n",
    "GET /get_transfer_engine_info_batch?ranks={n}-{m}&wait=60 HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /get_parallelism_config?rank={n}&role=draft&wait=60 HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /list_encoder_urls?after=0&wait=60 HTTP/1.1\r\nHost: x\r\n\r\n",
]
"""Every shape of parked wait: each kind, a batch, HEAD, HTTP/1.0 (their replies differ)."""


async def _park(
    host: str, port: int, count: int
) -> list[tuple[str, asyncio.StreamReader, asyncio.StreamWriter]]:
    """``count`` raw connections, each with one parked-wait request sent."""
    opened = []
    for index in range(count):
        request = _PARKED_REQUESTS[index % len(_PARKED_REQUESTS)].format(n=index, m=index + 3)
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(request.encode())
        opened.append((request, reader, writer))
    for _, _, writer in opened:
        await writer.drain()
    return opened


def _check_503(request: str, data: bytes) -> None:
    """``data`` (all a connection received) is one 503 saying the server is shutting down, then the close."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    version = "HTTP/1.0" if request.split("\r\n")[0].endswith("HTTP/1.0") else "HTTP/1.1"
    assert lines[0] == f"{version} 503 Service Unavailable", (request, data)
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Aiobootstrap-Boot"]
    expected = json.dumps({"detail": SHUTTING_DOWN_DETAIL}, separators=(",", ":")).encode()
    assert int(headers["Content-Length"]) == len(expected)
    assert body == (b"" if request.startswith("HEAD") else expected), (request, data)


async def test_sigterm_answers_every_parked_wait_with_503_and_exits_0() -> None:
    """SIGTERM with a few hundred parked waits of every shape: each gets exactly one 503, the exit status is 0."""
    count = 300
    served = serve("--log-level", "info")
    process = served.process
    try:
        host, port = served.url.removeprefix("http://").rsplit(":", 1)
        parked = await _park(host, int(port), count)
        async with aiohttp.ClientSession() as session:

            async def waiters() -> int:
                async with session.get(served.url + "/ranks") as reply:
                    return int((await reply.json())["waiters"])

            async with asyncio.timeout(GUARD):
                # The server is another process: its listing is how it reports its parked waits.
                while await waiters() < count:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
        process.send_signal(signal.SIGTERM)
        received = await asyncio.wait_for(asyncio.gather(*(reader.read() for _, reader, _ in parked)), GUARD)
        _, err = await asyncio.to_thread(process.communicate, timeout=GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=GUARD)
    for (request, _, writer), data in zip(parked, received, strict=True):
        writer.close()
        _check_503(request, data)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert f"answered {count} parked waits with 503" in err


async def test_close_answers_as_the_error_middleware_would() -> None:
    """The ready-made 503 carries the headers and body the error middleware gives ShuttingDown (bar Date, Connection)."""
    server = BootstrapServer(port=0)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            # The middleware's 503: a wait that parks after the registry closed.
            server.registry.close()
            async with session.get(f"{server.url}/get_transfer_engine_info?rank=1&wait=60") as reply:
                made = (reply.status, dict(reply.headers), await reply.read())
    finally:
        await server.close()
    server = BootstrapServer(port=0)
    await server.start()
    parked = await _park("127.0.0.1", server.port, 1)
    await until(lambda: server.registry.parked == 1)
    boot = server.registry.store.incarnation
    await asyncio.wait_for(server.close(), GUARD)
    data = await asyncio.wait_for(parked[0][1].read(), GUARD)
    parked[0][2].close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    ignored = {"Date", "Connection", BOOT_HEADER}
    assert (lines[0], {k: v for k, v in headers.items() if k not in ignored}, body) == (
        "HTTP/1.1 503 Service Unavailable",
        {k: v for k, v in made[1].items() if k not in ignored},
        made[2],
    )
    assert made[0] == 503
    assert headers[BOOT_HEADER] == boot
    assert headers["Connection"] == "close"


async def test_close_wakes_in_process_waiters_and_leaves_nothing_parked() -> None:
    """A wait parked in-process (no HTTP) gets ShuttingDown at close; no parked wait, task or waitlist is left."""
    server = BootstrapServer(port=0)
    await server.start()
    registry = server.registry
    in_process = asyncio.create_task(registry.wait(info_key(5), 60))
    parked = await _park("127.0.0.1", server.port, 12)
    await until(lambda: registry.parked == 13)
    assert in_process in registry.parked_tasks
    await asyncio.wait_for(server.close(), GUARD)
    with pytest.raises(ShuttingDown):
        await asyncio.wait_for(in_process, GUARD)
    for request, reader, writer in parked:
        _check_503(request, await asyncio.wait_for(reader.read(), GUARD))
        writer.close()
    assert (registry.parked, registry.parked_tasks, registry.waiting_keys) == (0, [], 0)
    assert server.connections.open == 0


async def test_a_reply_already_begun_is_not_answered_again() -> None:
    """A parked wait whose request has bytes written already is left to its handler: one reply per request."""
    server = BootstrapServer(port=0)
    await server.start()
    parked = await _park("127.0.0.1", server.port, 1)
    await until(lambda: server.registry.parked == 1)
    (task,) = server.registry.parked_tasks
    table = server.connections
    _, request = table._by_task[task]
    request.writer.output_size = 1  # as if a reply had begun (an early reply writes before its task resumes)
    assert table.answer([task], lambda request: b"never") == 0
    request.writer.output_size = 0
    await asyncio.wait_for(server.close(), GUARD)
    _check_503(parked[0][0], await asyncio.wait_for(parked[0][1].read(), GUARD))
    parked[0][2].close()
