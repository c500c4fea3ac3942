"""A real redis-server for the tests and the bench: its own port, its own directory, and handles for faults.

``redis_server`` (a fixture of ``tests/redis_server.py``) starts one on a free loopback
port in a temporary directory, with the settings docs/scale-out.md
recommends (AOF on, ``appendfsync always``, no RDB snapshots), and kills it
at the end. The test machine's own Redis is never touched: the port is
chosen by the system and always passed explicitly.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import redis

from .ports import quiet_port

REDIS_SERVER = shutil.which("redis-server")
SKIP_REASON = (
    "redis-server is not on PATH (apt-get install redis-server); the Redis store tests need a real one"
)


def free_port() -> int:
    """A port for a node, below the ephemeral range: a node killed and started again keeps it (``ports``)."""
    return quiet_port()


class Pausable:
    """A test's process it can freeze (``SIGSTOP``) and thaw (a node that hangs without closing a socket),
    and stop, a frozen one included."""

    process: subprocess.Popen[bytes] | None

    def pause(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
            self.process.wait()


class RedisServer(Pausable):
    """One redis-server process, restartable on the same port and directory."""

    def __init__(self, directory: Path, tls: tuple[str, str, str] | None = None) -> None:
        """``tls``: (certificate, key, CA) files to serve TLS only, on ``port``."""
        assert REDIS_SERVER is not None, SKIP_REASON
        self.executable = REDIS_SERVER
        self.directory = directory
        self.port = free_port()
        self.tls = tls
        socket_path = directory / "redis.sock"
        # A Unix socket's path has a length limit (108 bytes on Linux): a deep
        # temporary directory gets no socket, rather than a server that fails to start.
        self.unix_socket: Path | None = socket_path if len(str(socket_path)) < 100 else None
        self.process: subprocess.Popen[bytes] | None = None
        self.extra_args: list[str] = []
        """More redis-server options, for the next start (``--replicaof HOST PORT``, say)."""
        self.password: str | None = None
        """``requirepass`` (and ``masterauth``, for a replica of a node with the same), from the next start."""

    @property
    def url(self) -> str:
        credentials = f":{self.password}@" if self.password is not None else ""
        return f"redis://{credentials}127.0.0.1:{self.port}/0"

    def start(self, guard: float = 10.0) -> None:
        """Start (or restart after a kill) and return once it answers PING."""
        assert self.process is None or self.process.poll() is not None, "already running"
        args = [
            self.executable,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            str(self.directory),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            str(self.directory / "redis.log"),
            "--protected-mode",
            "yes",
            # A primary sends a new replica its data at once: by default it waits 5 s for more
            # replicas to share one transfer, which each test's heal after a failover waited out.
            "--repl-diskless-sync-delay",
            "0",
        ]
        args += self.extra_args
        if self.password is not None:
            args += ["--requirepass", self.password, "--masterauth", self.password]
        if self.unix_socket is not None:
            args += ["--unixsocket", str(self.unix_socket), "--unixsocketperm", "700"]
        if self.tls is not None:
            cert, key, ca = self.tls
            args += ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", cert]
            args += ["--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no"]
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + guard
        while True:
            with contextlib.suppress(OSError, redis.RedisError):
                if self.command("PING"):
                    return
            if self.process.poll() is not None:
                log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server exited with {self.process.returncode}:\n{log}")
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer PING in time")
            time.sleep(0.01)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final fsync (the page cache survives, see docs)."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    # -- the test's own commands, through redis-py's blocking client ----------

    def _client(self) -> redis.Redis:
        tls: dict[str, Any] = {}
        if self.tls is not None:
            tls = {"ssl": True, "ssl_ca_certs": self.tls[2]}
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            password=self.password,
            socket_timeout=5.0,
            decode_responses=True,
            **tls,
        )

    def command(self, *args: str) -> object:
        with self._client() as client:
            return client.execute_command(*args)

    def flushall(self) -> None:
        self.command("FLUSHALL")

    def clients(self) -> list[dict[str, str]]:
        with self._client() as client:
            listed: list[dict[str, str]] = client.client_list()
            return listed

    def kill_clients(self, name: str) -> int:
        """``CLIENT KILL`` every connection named ``name``; how many were killed."""
        killed = 0
        for client in self.clients():
            if client.get("name") == name:
                killed += int(str(self.command("CLIENT", "KILL", "ID", client["id"])))
        return killed
