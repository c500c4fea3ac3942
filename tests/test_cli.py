"""python -m aiobootstrap as a user runs it: a real subprocess on a free port."""

from __future__ import annotations

import asyncio
import resource
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import aiohttp
import pytest

from .helpers.cli import Served, launch, serve
from .helpers.waits import GUARD


@pytest.fixture
def served() -> Iterator[Served]:
    server = serve("--log-level", "warning")
    yield server
    if server.process.poll() is None:
        server.process.kill()
    server.process.communicate(timeout=GUARD)


async def test_listening_line_names_the_real_port(served: Served) -> None:
    """--port 0 prints one line with the port the system chose, and serves there."""
    host, port = served.url.removeprefix("http://").split(":")
    assert host == "127.0.0.1"
    assert int(port) > 0
    async with aiohttp.ClientSession() as session, session.get(served.url + "/health") as response:
        assert await response.text() == "OK"


def test_taken_port_fails_with_one_line_and_status_2() -> None:
    """A held port: exit 2, one stderr line naming the port and --port, no traceback."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        process = launch("--port", str(port))
        out, err = process.communicate(timeout=GUARD)
    assert process.returncode == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(port) in lines[0]
    assert "--port" in lines[0]
    assert "another process" in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [["--port", "x"], ["--port", "70000"], ["--world-size", "0"], ["--max-wait", "nan"], ["--bogus"]],
)
def test_bad_options_fail_with_one_line(args: list[str]) -> None:
    """A bad option is one stderr line and exit status 2, never a traceback."""
    process = launch(*args)
    _out, err = process.communicate(timeout=GUARD)
    assert process.returncode == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_signal_answers_parked_waits_with_503_and_exits_0(served: Served, signum: int) -> None:
    """SIGTERM/SIGINT: every parked long-poll gets a 503 saying the server is shutting down; exit 0."""
    async with aiohttp.ClientSession() as session:

        async def wait_for_rank(rank: int) -> tuple[int, dict[str, str]]:
            url = f"{served.url}/get_transfer_engine_info?rank={rank}&wait=60"
            async with session.get(url) as response:
                return response.status, await response.json()

        async def parked() -> int:
            async with session.get(served.url + "/ranks") as response:
                return int((await response.json())["waiters"])

        waiters = [asyncio.create_task(wait_for_rank(rank % 3)) for rank in range(20)]
        async with asyncio.timeout(GUARD):
            while await parked() < 20:
                pass
        served.process.send_signal(signum)
        replies = await asyncio.wait_for(asyncio.gather(*waiters), GUARD)
    for status, body in replies:
        assert status == 503
        assert "shutting down" in body["detail"]
    assert await asyncio.to_thread(served.process.wait, GUARD) == 0
    _, err = served.process.communicate(timeout=GUARD)
    assert "Traceback" not in err


def test_open_file_limit_is_raised_to_the_hard_limit() -> None:
    """At start the server raises its soft RLIMIT_NOFILE toward the hard limit."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip("needs a finite hard limit above 256")

    def lower_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    server = serve("--log-level", "warning", preexec_fn=lower_soft_limit)
    try:
        with open(f"/proc/{server.process.pid}/limits") as limits:
            line = next(row for row in limits if row.startswith("Max open files"))
        assert line.split()[3:5] == [str(hard), str(hard)]
    finally:
        server.process.kill()
        server.process.communicate(timeout=GUARD)


def test_serving_binds_before_importing_the_server() -> None:
    """The package and the CLI import without aiohttp, so a taken port is reported without waiting for it."""
    probe = (
        "import sys, aiobootstrap, aiobootstrap.cli.main; "
        "print(sorted(m for m in ('aiohttp', 'aiobootstrap.server.server', 'aiobootstrap.client.client') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=GUARD, check=True
    )
    assert result.stdout.strip() == "[]"


def test_serving_without_options_is_serving_with_the_configs_defaults() -> None:
    """Every option's default (and so --help) is ServerConfig's; only max waiters fits the open file limit."""
    import dataclasses

    from aiobootstrap import ServerConfig
    from aiobootstrap.cli.parser import server_config, server_parser

    config = server_config(server_parser().parse_args([]), {})
    assert config == dataclasses.replace(ServerConfig(), max_waiters=config.max_waiters)


def test_help_shows_the_configs_defaults() -> None:
    """--help names ServerConfig's values, so the two cannot disagree."""
    from aiobootstrap import ServerConfig
    from aiobootstrap.cli.parser import server_parser

    text = " ".join(server_parser().format_help().split())
    defaults = ServerConfig()
    for shown in (defaults.max_wait, defaults.idle_timeout, defaults.body_timeout):
        assert f"(default: {shown:g})" in text
    for count in (
        defaults.max_namespaces,
        defaults.max_ranks,
        defaults.max_request_line,
        defaults.max_body_size,
    ):
        assert f"(default: {count}" in text


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
        process = launch("--host", "::1", "--port", str(port))
        _, err = process.communicate(timeout=GUARD)
    assert process.returncode == 2
    assert err.startswith(f"Cannot listen on [::1]:{port}: another process already holds port {port}")


def _health(url: str) -> str:
    with urllib.request.urlopen(url + "/health", timeout=GUARD) as response:
        return str(response.read().decode())


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_wildcard_host_prints_a_url_that_can_be_used(host: str) -> None:
    """--host 0.0.0.0 (or ::) listens everywhere and prints this machine's address, never the wildcard."""
    if host == "::" and not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    server = serve("--host", host, "--log-level", "warning")
    try:
        assert "0.0.0.0" not in server.url
        assert "[::]" not in server.url
        assert _health(server.url) == "OK"
    finally:
        server.process.kill()
        server.process.communicate(timeout=GUARD)


def test_localhost_is_served_on_each_of_its_addresses() -> None:
    """--host localhost listens on every address localhost resolves to (127.0.0.1, and ::1 where listed)."""
    server = serve("--host", "localhost", "--log-level", "warning")
    try:
        port = server.url.rsplit(":", 1)[1]
        assert server.url == f"http://localhost:{port}"
        addresses = {
            str(info[4][0]) for info in socket.getaddrinfo("localhost", int(port), type=socket.SOCK_STREAM)
        }
        for address in addresses:
            assert _health(f"http://{'[' + address + ']' if ':' in address else address}:{port}") == "OK"
    finally:
        server.process.kill()
        server.process.communicate(timeout=GUARD)


def test_one_port_on_every_address_a_name_resolves_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name that resolves to 127.0.0.1 and ::1 gets a listening socket on each, on the same port."""
    from aiobootstrap.server.bind import bind_sockets

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    resolved = [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0)),
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", 0, 0, 0)),
    ]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: resolved)
    socks = bind_sockets("both", 0)
    try:
        assert [sock.getsockname()[0] for sock in socks] == ["127.0.0.1", "::1"]
        assert len({sock.getsockname()[1] for sock in socks}) == 1
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.parametrize("args", [["--port", "0"], ["status"]], ids=["serve", "status"])
def test_a_missing_dependency_is_one_line_naming_it_and_the_venv(args: list[str]) -> None:
    """Run by a python without aiohttp (the system's, not .venv's): one line and status 1, no traceback."""
    hide_aiohttp = (
        "import runpy, sys; sys.modules['aiohttp'] = None; "
        f"sys.argv = ['aiobootstrap', *{args!r}]; runpy.run_module('aiobootstrap', run_name='__main__')"
    )
    result = subprocess.run(
        [sys.executable, "-c", hide_aiohttp], capture_output=True, text=True, timeout=GUARD, check=False
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1
    assert "'aiohttp' is missing" in result.stderr
    assert ".venv/bin/python -m aiobootstrap" in result.stderr
