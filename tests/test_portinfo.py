"""A taken port's error names the process holding it and whether it is an aiobootstrap server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiobootstrap import AddressInUse, ThreadedBootstrapServer
from aiobootstrap._version import __version__
from aiobootstrap.server.portinfo import describe_holder, find_holders, listening_inodes

from .helpers.waits import GUARD

needs_proc = pytest.mark.skipif(
    not Path("/proc/net/tcp").exists(), reason="finding the holder reads Linux's /proc"
)

TCP_TABLE = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1A85 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1
   1: 0100007F:1A85 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1
   2: 0100007F:1A86 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4444 1
"""
TCP6_TABLE = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr
   0: 00000000000000000000000000000000:1A85 00000000000000000000000000000000:0000 0A 00000000:00000000 \
00:00000000 00000000  1000        0 5151 1
"""


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port this test process listens on without answering anything."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def test_listening_inodes_reads_only_listeners_on_the_port() -> None:
    """Only LISTEN rows of the asked port count, in the IPv4 and the IPv6 table."""
    assert list(listening_inodes(TCP_TABLE, 6789)) == ["4242"]
    assert list(listening_inodes(TCP6_TABLE, 6789)) == ["5151"]
    assert list(listening_inodes(TCP_TABLE, 1)) == []
    assert list(listening_inodes("header only\n", 6789)) == []


def test_holder_unknown_when_proc_tells_nothing(tmp_path: Path, held_port: int) -> None:
    """Without a readable /proc, no pid is named; the /health verdict still is."""
    assert find_holders(held_port, proc=tmp_path) == []
    clause = describe_holder("127.0.0.1", held_port, proc=tmp_path)
    assert "pid" not in clause
    assert clause.startswith("no answer to GET /health")


def test_holder_of_a_fake_proc(tmp_path: Path) -> None:
    """The pid whose fd links to the listening socket's inode is named, with its command line."""
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(TCP_TABLE)
    for pid, inode in (("77", "4343"), ("78", "4242")):
        (tmp_path / pid / "fd").mkdir(parents=True)
        (tmp_path / pid / "fd" / "3").symlink_to(f"socket:[{inode}]")
        (tmp_path / pid / "cmdline").write_bytes(b"python\0-m\0aiobootstrap\0")
    holders = find_holders(6789, proc=tmp_path)
    assert [(holder.pid, holder.command) for holder in holders] == [(78, "python -m aiobootstrap")]


@needs_proc
def test_a_plain_socket_is_named_and_is_not_aiobootstrap(held_port: int) -> None:
    """A socket held by this very process: our pid, our command, and not an aiobootstrap server."""
    clause = describe_holder("127.0.0.1", held_port)
    assert f"pid {os.getpid()} (this process)" in clause
    assert "not a live aiobootstrap server" in clause


@needs_proc
def test_threaded_server_bind_failure_names_a_running_aiobootstrap_server() -> None:
    """The AddressInUse raised in the caller's thread says an aiobootstrap server holds the port."""
    with ThreadedBootstrapServer(port=0) as first, pytest.raises(AddressInUse) as caught:
        ThreadedBootstrapServer(port=first.port)
    assert f"pid {os.getpid()}" in caught.value.holder
    assert f"an aiobootstrap {__version__} server: it answered GET /health" in caught.value.holder
    assert caught.value.holder in caught.value.detail


def serve_on(port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aiobootstrap", "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )


@needs_proc
def test_cli_line_names_a_plain_socket_holder(held_port: int) -> None:
    """One stderr line: the port, --port, this test's pid, not aiobootstrap; exit status 2."""
    result = serve_on(held_port)
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert f":{held_port}" in line
    assert "--port" in line
    assert f"pid {os.getpid()}:" in line
    assert "not a live aiobootstrap server" in line


@needs_proc
def test_cli_line_names_an_aiobootstrap_holder() -> None:
    """With a real aiobootstrap server on the port, the line says it is one, and whose pid it is."""
    with ThreadedBootstrapServer(port=0) as first:
        result = serve_on(first.port)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert f"pid {os.getpid()}:" in line
    assert f"an aiobootstrap {__version__} server: it answered GET /health" in line


@pytest.fixture
def connected_port() -> Iterator[int]:
    """A port this test process holds by an outgoing connection from it, not by listening on it."""
    with socket.socket() as listener, socket.socket() as outgoing:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        outgoing.connect(listener.getsockname())
        accepted, _ = listener.accept()
        with accepted:
            yield outgoing.getsockname()[1]


@needs_proc
def test_a_port_held_by_a_connection_names_its_holder(connected_port: int) -> None:
    """A port taken by a connected socket (an ephemeral port of an outgoing connection) names its process too,
    saying it holds it by a connection; the holder scan read listening sockets only and named nobody."""
    [holder] = [holder for holder in find_holders(connected_port) if holder.pid == os.getpid()]
    assert holder.listening is False
    clause = describe_holder("127.0.0.1", connected_port)
    assert f"pid {os.getpid()} (this process) by a connection from that port" in clause
    result = serve_on(connected_port)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert f"pid {os.getpid()} by a connection from that port" in line
