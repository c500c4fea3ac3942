"""Behaviour found wanting when the server was checked from outside, pinned here."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from typing import Any

import pytest

from aiobootstrap import BootstrapClient, BootstrapError, BootstrapServer
from aiobootstrap import _protocol as protocol

from .conftest import GUARD, register_in, registration


@pytest.fixture(params=["orjson", "stdlib"])
def codec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with orjson when it is installed, and as if it were not."""
    if request.param == "orjson":
        pytest.importorskip("orjson", reason="the fast extra is not installed")
    else:
        monkeypatch.setattr(protocol, "orjson", None)
    return str(request.param)


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"1E+999"])
async def test_a_number_too_large_for_a_float_is_refused_and_stores_nothing(
    client: Any, codec: str, number: bytes
) -> None:
    """A number that overflows to infinity is a 400, never stored as null or Infinity."""
    body = (
        b'{"rank": 1, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {"x": %s}}}' % number
    )
    response = await client.put("/register_transfer_engine_info", data=body)
    assert response.status == 400
    assert "JSON" in (await response.json())["detail"]
    assert (await client.get("/get_transfer_engine_info?rank=1")).status == 404


async def test_finite_floats_still_register(client: Any, codec: str) -> None:
    """Large but finite floats and long integers are stored and returned unchanged."""
    weights = {"big": 1.7976931348623157e308, "tiny": 1e-320, "long": 2**70}
    response = await client.put("/register_transfer_engine_info", json=registration(1, weights=weights))
    assert response.status == 200
    reply = await (await client.get("/get_transfer_engine_info?rank=1")).json()
    assert reply["remote_instance_transfer_engine_info"][1] == weights


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
    # cancelled): at least 2 * timeout before the fix, whatever the machine's load.
    assert loop.time() - started < 2 * timeout


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:1", "htp://127.0.0.1:1"])
async def test_a_url_that_is_not_http_is_refused_at_once_not_retried(url: str) -> None:
    """A client for a non-HTTP URL raises BootstrapError at once instead of retrying it for ever."""
    async with BootstrapClient(url) as client:
        with pytest.raises(BootstrapError, match="Invalid server URL"):
            await asyncio.wait_for(client.get(0), GUARD)


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:1", "not a url", "127.0.0.1:6789"])
def test_tools_refuse_a_bad_url_as_a_bad_argument(url: str) -> None:
    """A tool given a --url that is not http(s):// exits 2 with one line, as for any bad argument."""
    done = subprocess.run(
        [sys.executable, "-m", "aiobootstrap", "get", "--url", url, "--rank", "0"],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "--url" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_taken_ipv6_port_is_named_with_brackets() -> None:
    """The port-in-use line writes an IPv6 address as [::1]:PORT, as URLs and the health probe do."""
    holder = socket.socket(socket.AF_INET6)
    try:
        holder.bind(("::1", 0))
    except OSError:
        holder.close()
        pytest.skip("no IPv6 loopback here")
    with holder:
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "aiobootstrap", "--host", "::1", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=GUARD,
        )
    assert done.returncode == 2
    assert done.stderr.startswith(f"Cannot listen on [::1]:{port}: another process already holds port {port}")


@pytest.mark.parametrize("wait", ["1_0", " 1", "1 ", "\u0663", "\uff11", "+1", "0x1"])
async def test_wait_is_plain_ascii_decimal_like_the_integers(client: Any, wait: str) -> None:
    """wait= refuses what float() alone would take (1_0, other scripts' digits, spaces) with a 400."""
    await client.put("/register_transfer_engine_info", json=registration(1))
    response = await client.get("/get_transfer_engine_info", params={"rank": "1", "wait": wait})
    assert response.status == 400
    assert "wait" in (await response.json())["detail"]


@pytest.mark.parametrize("wait", ["0", "1", "0.5", ".5", "5.", "1e0", "2E-1", "300"])
async def test_wait_takes_every_ordinary_decimal(client: Any, wait: str) -> None:
    """Ordinary decimal and exponent forms of wait= are accepted."""
    await client.put("/register_transfer_engine_info", json=registration(1))
    response = await client.get("/get_transfer_engine_info", params={"rank": "1", "wait": wait})
    assert response.status == 200


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
