"""Real etcd servers for the tests: one member, or a three-member cluster whose members a test kills.

Each member listens on loopback client and peer ports of its own (``ports``: below the
ephemeral range, so a member killed and started again finds its ports free) with a data
directory under the test's temporary directory; the machine's own etcd is never touched. The
fixtures (``tests/helpers/etcd_server.py``) skip, with a reason starting "etcd", when the binary or
the ``etcd`` extra (aetcd) is missing (:func:`skip_reason`); ``.ci/run`` turns that skip into a failure.

The election settings are etcd's defaults (100 ms heartbeat, 1 s election timeout): the minimum
lease TTL, the failover time and everything the docs say about them are the ones an operator
meets.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import socket
import subprocess
import time
from pathlib import Path

from .ports import quiet_port

ETCD = shutil.which("etcd")
SKIP_NO_ETCD = "etcd is not on PATH (apt-get install etcd-server); the etcd store tests need a real one"
SKIP_NO_AETCD = "etcd extra missing (pip install 'aiobootstrap[etcd]'); the etcd store tests need aetcd"

_PREFIXES = itertools.count()


def skip_reason() -> str | None:
    """Why the etcd tests cannot run here, or ``None``."""
    if ETCD is None:
        return SKIP_NO_ETCD
    from aiobootstrap.store.etcd import etcd_missing

    if etcd_missing():
        return SKIP_NO_AETCD
    return None


def unique_prefix() -> str:
    """A prefix no other test of this process uses (two registries apart in one cluster)."""
    return f"t{next(_PREFIXES)}x{int(time.time() * 1000) % 100_000}"


class Member:
    """One etcd process of a cluster, restartable on its ports and data directory."""

    def __init__(self, name: str, directory: Path, taken: set[int]) -> None:
        assert ETCD is not None, SKIP_NO_ETCD
        self.name = name
        self.directory = directory
        self.client_port = quiet_port(taken)
        self.peer_port = quiet_port(taken)
        self.process: subprocess.Popen[bytes] | None = None
        self.cluster: list[Member] = [self]
        self.state = "new"
        self.token = f"aiobootstrap-test-{name}-{self.peer_port}"
        self.extra_args: list[str] = []
        """More etcd options, for the next start (``--auth-token-ttl 1``, say)."""
        self.tls: tuple[str, str] | None = None
        """(certificate, key) files: serve clients over TLS only, from the next start."""

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def client_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.endpoint}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def start(self) -> None:
        """Start (or start again after a kill) and return once the process is up (not necessarily a leader)."""
        assert self.process is None or self.process.poll() is not None, "already running"
        assert ETCD is not None
        data = self.directory / "data"
        args = [
            ETCD,
            "--name",
            self.name,
            "--data-dir",
            str(data),
            "--listen-client-urls",
            self.client_url,
            "--advertise-client-urls",
            self.client_url,
            "--listen-peer-urls",
            self.peer_url,
            "--initial-advertise-peer-urls",
            self.peer_url,
            "--initial-cluster",
            ",".join(f"{member.name}={member.peer_url}" for member in self.cluster),
            "--initial-cluster-state",
            self.state,
            "--initial-cluster-token",
            self.token,
            *self.extra_args,
        ]
        if self.tls is not None:
            args += ["--cert-file", self.tls[0], "--key-file", self.tls[1]]
        log = open(self.directory / "etcd.log", "ab")  # noqa: SIM115 - the process holds it
        with log:
            self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def listening(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.client_port), 0.2):
            return True
        return False

    def kill(self) -> None:
        """SIGKILL: no shutdown, nothing flushed beyond what etcd's WAL already synced."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def wipe(self) -> None:
        """Kill it and remove its data: started again, it is a new cluster's member."""
        self.kill()
        shutil.rmtree(self.directory / "data", ignore_errors=True)
        self.state = "new"
        self.token += "-wiped"

    def log(self) -> str:
        path = self.directory / "etcd.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


class Cluster:
    """One or three members on loopback, and the commands a test sends them through etcdctl."""

    def __init__(self, directory: Path, size: int = 1) -> None:
        taken: set[int] = set()
        self.members = [Member(f"m{index}", directory / f"m{index}", taken) for index in range(size)]
        for member in self.members:
            member.directory.mkdir(parents=True, exist_ok=True)
            member.cluster = self.members
            member.token = f"aiobootstrap-test-{self.members[0].peer_port}"

        self.ctl_args: list[str] = []
        """More etcdctl options for the test's own commands (``--user``, ``--cacert``)."""

    def url(self, prefix: str | None = None, *, scheme: str = "etcd", credentials: str = "") -> str:
        endpoints = ",".join(member.endpoint for member in self.members)
        at = f"{credentials}@" if credentials else ""
        return f"{scheme}://{at}{endpoints}" + (f"?prefix={prefix}" if prefix else "")

    def start(self, guard: float = 20.0) -> None:
        for member in self.members:
            member.start()
        self.wait_healthy(guard)

    def wait_healthy(self, guard: float = 20.0) -> None:
        """Return once a write through every running member is committed (a leader is elected)."""
        deadline = time.monotonic() + guard
        running = [member for member in self.members if member.process and member.process.poll() is None]
        for member in running:
            while self.etcdctl(member, "put", "aiobootstrap-test-health", "ok", check=False) != 0:
                if member.process is not None and member.process.poll() is not None:
                    raise RuntimeError(f"etcd {member.name} exited:\n{member.log()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"etcd {member.name} found no leader in time:\n{member.log()}")
                time.sleep(0.05)

    def etcdctl(self, member: Member, *args: str, check: bool = True) -> int:
        completed = subprocess.run(
            ["etcdctl", f"--endpoints={member.client_url}", "--command-timeout=2s", *self.ctl_args, *args],
            capture_output=True,
            env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"},
            check=False,
        )
        if check and completed.returncode:
            raise RuntimeError(completed.stderr.decode(errors="replace"))
        return completed.returncode

    def leader(self) -> Member:
        """The member that is leader now (asked of each running member)."""
        for member in self.members:
            if member.process is None or member.process.poll() is not None:
                continue
            completed = subprocess.run(
                [
                    "etcdctl",
                    f"--endpoints={member.client_url}",
                    *self.ctl_args,
                    "endpoint",
                    "status",
                    "-w",
                    "fields",
                ],
                capture_output=True,
                env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"},
                check=False,
            )
            fields = dict(
                line.split(" : ", 1) for line in completed.stdout.decode().splitlines() if " : " in line
            )
            if fields.get('"Leader"') and fields.get('"Leader"') == fields.get('"MemberID"'):
                return member
        raise RuntimeError("no member says it is the leader")

    def stop(self) -> None:
        for member in self.members:
            member.kill()
