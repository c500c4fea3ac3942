"""Who holds a port we could not bind: best effort, for one line of error text.

Two questions, each answered only when it can be found out quickly:

- Which process listens on the port. On Linux, ``/proc/net/tcp`` and
  ``/proc/net/tcp6`` give the listening socket's inode, and the process whose
  ``/proc/PID/fd`` holds ``socket:[INODE]`` is its owner. Other users'
  processes are usually not readable: then the pid is simply not named.
  With no listener, a socket of any state bound to the port is named: a port
  in the kernel's ephemeral range (``ip_local_port_range``) is often held by
  some process's outgoing connection, and the clause says so.
- Whether it is an aiobootstrap server: one ``GET /health`` with a short
  timeout, sent to the address we tried to bind (loopback for a wildcard
  address), so it never leaves this machine. aiobootstrap marks its reply
  with the ``X-Aiobootstrap`` header.

Blocking by design (files and one short request); the server calls it in a
worker thread.
"""

from __future__ import annotations

import http.client
import os
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .._names import HEALTH_HEADER, host_port

__all__ = ["Holder", "describe_holder", "find_holders", "listening_inodes"]

_PROBE_TIMEOUT = 0.2
"""Seconds the ``/health`` probe may take: a live local server answers in about a millisecond."""
_SCAN_BUDGET = 0.25
"""Seconds the ``/proc`` scan may take on a machine with very many processes."""
_MAX_COMMAND = 160
_TCP_LISTEN = "0A"
_WILDCARD_PROBE = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}


@dataclass(frozen=True, slots=True)
class Holder:
    """A process that holds the port: listening on it, or (``listening=False``) by a connection from it."""

    pid: int
    command: str
    listening: bool = True


def describe_holder(host: str, port: int, proc: Path = Path("/proc")) -> str:
    """A clause naming who holds ``host:port``, or ``""`` when nothing can be found out."""
    # The probe runs while /proc is scanned: the caller is about to exit on
    # this error, and both together stay well inside its one second.
    with ThreadPoolExecutor(1) as pool:
        verdict = pool.submit(_health_verdict, _WILDCARD_PROBE.get(host, host), port)
        holders = find_holders(port, proc)
        parts = [
            f"pid {holder.pid}{' (this process)' if holder.pid == os.getpid() else ''}"
            f"{'' if holder.listening else ' by a connection from that port'}: {holder.command}"
            for holder in holders[:3]
        ]
        if holders and not holders[0].listening:
            parts.append(_ephemeral_hint(port, proc))
        parts.append(verdict.result())
    return "; ".join(parts)


def find_holders(port: int, proc: Path = Path("/proc")) -> list[Holder]:
    """The processes listening on ``port``, as far as ``/proc`` lets us see; with none, those holding a socket
    of another state bound to it (``listening=False``)."""
    tables: list[str] = []
    for table in ("tcp", "tcp6"):
        try:
            tables.append((proc / "net" / table).read_text())
        except OSError:
            continue
    for listening in (True, False):
        inodes = {
            inode for text in tables for inode in listening_inodes(text, port, listening_only=listening)
        }
        if inodes:
            return [Holder(pid, _command(proc, pid), listening) for pid in _pids_holding(proc, inodes)]
    return []


def listening_inodes(table: str, port: int, *, listening_only: bool = True) -> Iterator[str]:
    """The inodes of sockets listening on ``port`` in a ``/proc/net/tcp{,6}`` table (of any state bound to it,
    with ``listening_only=False``)."""
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or (listening_only and fields[3] != _TCP_LISTEN):
            continue
        _, _, port_hex = fields[1].rpartition(":")
        try:
            local_port = int(port_hex, 16)
        except ValueError:
            continue
        if local_port == port and fields[9] != "0":
            yield fields[9]


def _pids_holding(proc: Path, inodes: Iterable[str]) -> list[int]:
    targets = {f"socket:[{inode}]" for inode in inodes}
    deadline = time.monotonic() + _SCAN_BUDGET
    pids: list[int] = []
    try:
        entries = sorted(os.listdir(proc), key=lambda name: (not name.isdigit(), name))
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or time.monotonic() > deadline:
            break
        if _holds(proc / entry / "fd", targets):
            pids.append(int(entry))
    return pids


def _holds(fd_dir: Path, targets: set[str]) -> bool:
    try:
        fds = os.listdir(fd_dir)
    except OSError:  # another user's process, or one that just exited
        return False
    for fd in fds:
        try:
            if os.readlink(fd_dir / fd) in targets:
                return True
        except OSError:
            continue
    return False


def _command(proc: Path, pid: int) -> str:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "command line not readable"
    command = " ".join(raw.decode(errors="replace").split("\0")).strip() or "no command line"
    command = " ".join(command.split())  # one line, whatever the arguments hold
    return command if len(command) <= _MAX_COMMAND else command[: _MAX_COMMAND - 3] + "..."


def _ephemeral_hint(port: int, proc: Path) -> str:
    try:
        low, high = map(int, (proc / "sys" / "net" / "ipv4" / "ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return "a connection's port is released when it closes"
    if low <= port <= high:
        return (
            f"{port} is in the kernel's ephemeral range {low}-{high} (ip_local_port_range), from which outgoing "
            "connections take their ports: serve on a port outside it"
        )
    return "a connection's port is released when it closes"


def _health_verdict(host: str, port: int) -> str:
    connection = http.client.HTTPConnection(host, port, timeout=_PROBE_TIMEOUT)
    where = f"GET /health on {host_port(host, port)}"
    try:
        connection.request("GET", "/health")
        response = connection.getresponse()
        response.read()
    except (OSError, http.client.HTTPException):
        return f"no answer to {where} within {_PROBE_TIMEOUT:g} s, so not a live aiobootstrap server"
    finally:
        connection.close()
    version = response.getheader(HEALTH_HEADER)
    if response.status == 200 and version:
        return f"an aiobootstrap {version} server: it answered {where}"
    return f"not an aiobootstrap server: {where} answered HTTP {response.status}, without its mark"
