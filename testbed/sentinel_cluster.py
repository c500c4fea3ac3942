"""A real Sentinel deployment for the tests and the bench: one primary, one replica, three Sentinels.

Each process gets a free loopback port and a directory of its own, with the
settings docs/scale-out.md recommends (AOF, ``appendfsync always``); the
Sentinels fail over quickly (``down-after-milliseconds`` 1000 unless told).
The machine's own Redis and Sentinel are never touched. :meth:`heal`
restarts a killed node as a replica of the current primary, so one
deployment serves several failovers in a row.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

import redis

from .redis_server import REDIS_SERVER, SKIP_REASON, Pausable, RedisServer, free_port

MASTER = "registry"
"""The name the Sentinels monitor the primary under."""


class SentinelProcess(Pausable):
    """One ``redis-server CONF --sentinel``: it rewrites its config file, so the file is its own."""

    def __init__(
        self,
        directory: Path,
        primary_port: int,
        down_after_ms: int,
        failover_timeout_ms: int,
        *,
        password: str | None = None,
        node_password: str | None = None,
        taken: set[int] | None = None,
    ) -> None:
        """``taken``: ports of the deployment's other processes, which a free port may just have been."""
        assert REDIS_SERVER is not None, SKIP_REASON
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.port = free_port()
        while taken is not None and self.port in taken:
            self.port = free_port()
        self.password = password
        """This Sentinel's own ``requirepass`` (the Sentinels use it with each other too)."""
        self.config = directory / "sentinel.conf"
        secrets = f"requirepass {password}\n" if password is not None else ""
        if node_password is not None:
            secrets += f"sentinel auth-pass {MASTER} {node_password}\n"
        self.config.write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            "daemonize no\n"
            f"dir {directory}\n"
            f"logfile {directory / 'sentinel.log'}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER} {down_after_ms}\n"
            f"sentinel failover-timeout {MASTER} {failover_timeout_ms}\n"
            f"sentinel parallel-syncs {MASTER} 1\n" + secrets
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, guard: float = 10.0) -> None:
        assert REDIS_SERVER is not None
        self.process = subprocess.Popen(
            [REDIS_SERVER, str(self.config), "--sentinel"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + guard
        # Answering is not enough: another process may answer on the port this one could not take.
        while not self.answers() or self.process.poll() is not None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.directory / "sentinel.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server --sentinel did not start:\n{log}")
            time.sleep(0.01)

    def answers(self) -> bool:
        with contextlib.suppress(OSError, redis.RedisError):
            return bool(self.client().ping())
        return False

    def client(self) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            password=self.password,
            socket_timeout=2.0,
            decode_responses=True,
        )

    def master(self) -> dict[str, str]:
        """``SENTINEL MASTER``: what this Sentinel knows of the primary."""
        with self.client() as client:
            state: dict[str, str] = client.execute_command("SENTINEL", "MASTER", MASTER)
            if isinstance(state, list):  # RESP2 without redis-py's parser: pairs
                state = dict(zip(state[::2], state[1::2], strict=True))
            return state

    def store_clients(self) -> list[str]:
        """The names of the connections an aiobootstrap store holds to this Sentinel (``PREFIX.sentinel``)."""
        with self.client() as client:
            listed: list[dict[str, str]] = client.client_list()
        return [entry["name"] for entry in listed if entry.get("name", "").endswith(".sentinel")]


class SentinelCluster:
    """A primary, its replica and three Sentinels, started and stopped together."""

    def __init__(
        self,
        directory: Path,
        *,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 2000,
        node_password: str | None = None,
        sentinel_password: str | None = None,
    ) -> None:
        """``node_password``: the Redis nodes' ``requirepass``; ``sentinel_password``: the Sentinels' own."""
        assert REDIS_SERVER is not None, SKIP_REASON
        self.nodes = [RedisServer(_fresh(directory / name)) for name in ("node-a", "node-b")]
        for node in self.nodes:
            node.password = node_password
        while self.nodes[1].port == self.nodes[0].port:  # a free port is free until taken
            self.nodes[1].port = free_port()
        primary = self.nodes[0]
        self.nodes[1].extra_args = ["--replicaof", "127.0.0.1", str(primary.port)]
        self.node_password = node_password
        self.sentinel_password = sentinel_password
        taken = {node.port for node in self.nodes}
        self.sentinels = []
        for index in range(3):
            sentinel = SentinelProcess(
                directory / f"sentinel-{index}",
                primary.port,
                down_after_ms,
                failover_timeout_ms,
                password=sentinel_password,
                node_password=node_password,
                taken=taken,
            )
            taken.add(sentinel.port)
            self.sentinels.append(sentinel)

    @property
    def url(self) -> str:
        """The store URL every aiobootstrap replica is given, with both passwords when there are."""
        return self.url_with(self.sentinel_password)

    def url_with(self, sentinel_password: str | None) -> str:
        """The store URL, giving the Sentinels ``sentinel_password`` (``None``: none)."""
        hosts = ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self.sentinels)
        credentials = f":{self.node_password}@" if self.node_password is not None else ""
        query = f"?sentinel_password={sentinel_password}" if sentinel_password is not None else ""
        return f"redis+sentinel://{credentials}{hosts}/{MASTER}{query}"

    def start(self, guard: float = 20.0) -> None:
        for node in self.nodes:
            node.start()
        for sentinel in self.sentinels:
            sentinel.start()
        self.wait_healthy(guard)

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        for node in self.nodes:
            node.stop()

    def primary(self) -> RedisServer:
        """The node the Sentinels name as the primary now."""
        port = int(self.sentinels[0].master()["port"])
        return next(node for node in self.nodes if node.port == port)

    def replica(self) -> RedisServer:
        primary = self.primary()
        return next(node for node in self.nodes if node is not primary)

    def kill_primary(self) -> RedisServer:
        """SIGKILL the primary; the node killed."""
        primary = self.primary()
        primary.kill()
        return primary

    def failover(self, guard: float = 20.0) -> RedisServer:
        """``SENTINEL FAILOVER`` (the old primary lives on, demoted); the old primary. A Sentinel still
        finishing an earlier failover answers ``INPROG``: asked again until it takes this one."""
        old = self.primary()
        deadline = time.monotonic() + guard
        while True:
            try:
                with self.sentinels[0].client() as client:
                    client.execute_command("SENTINEL", "FAILOVER", MASTER)
                return old
            except redis.ResponseError as exc:
                if not str(exc).startswith("INPROG") or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    def promoted(self, old: RedisServer) -> bool:
        """True once every Sentinel names a primary other than ``old``, and that node says it is one."""
        try:
            ports = {int(sentinel.master()["port"]) for sentinel in self.sentinels}
        except (OSError, redis.RedisError):
            return False
        if len(ports) != 1 or old.port in ports:
            return False
        node = next(node for node in self.nodes if node.port in ports)
        with contextlib.suppress(OSError, redis.RedisError):
            return _info(node).get("role") == "master"
        return False

    def heal(self, guard: float = 20.0) -> None:
        """Restart every killed node as a replica of the current primary; return once all is well again."""
        primary = self.primary()
        for node in self.nodes:
            if node.process is None or node.process.poll() is not None:
                node.extra_args = ["--replicaof", "127.0.0.1", str(primary.port)]
                node.start()
        self.wait_healthy(guard)

    def wait_healthy(self, guard: float = 20.0) -> None:
        """Until the replica is in sync and every Sentinel sees the primary, the replica and the others."""
        deadline = time.monotonic() + guard
        why: str | None = "not checked"
        while time.monotonic() < deadline:
            why = self._unhealthy()
            if why is None:
                return
            time.sleep(0.05)
        raise RuntimeError(f"the Sentinel deployment did not settle: {why}")

    def wait_synced(self, guard: float = 20.0) -> None:
        """Until the deployment is healthy and the replica holds every write the primary has (its
        replication offset the primary's): a failover then has nothing to lose."""
        deadline = time.monotonic() + guard
        while time.monotonic() < deadline:
            if self._unhealthy() is None:
                with contextlib.suppress(OSError, redis.RedisError):
                    primary = _info(self.primary())
                    offsets = [
                        v.get("offset")
                        for k, v in primary.items()
                        if k.startswith("slave") and isinstance(v, dict)
                    ]
                    if offsets and all(offset == primary.get("master_repl_offset") for offset in offsets):
                        return
            time.sleep(0.02)
        raise RuntimeError("the replica did not catch up with the primary")

    def _unhealthy(self) -> str | None:
        try:
            primary = self.primary()
            replication = _info(primary)
            if replication.get("role") != "master":
                return "the named primary is not one"
            # What a replica's --store-min-replicas check reads: the replica's link can be up a moment before.
            if not any(
                isinstance(v, dict) and v.get("state") == "online"
                for k, v in replication.items()
                if k.startswith("slave")
            ):
                return "the primary counts no replica online yet"
            replica = self.replica()
            if _info(replica).get("master_link_status") != "up":
                return "the replica's link is down"
            for sentinel in self.sentinels:
                state = sentinel.master()
                if int(state["port"]) != primary.port or "s_down" in state["flags"]:
                    return f"Sentinel {sentinel.port} does not see the primary yet"
                if int(state["num-slaves"]) < 1 or int(state["num-other-sentinels"]) < 2:
                    return f"Sentinel {sentinel.port} does not know the replica or the others yet"
                with sentinel.client() as client:
                    replicas = client.execute_command("SENTINEL", "REPLICAS", MASTER)
                if not any(_listed(entry, replica.port) for entry in replicas):
                    return f"Sentinel {sentinel.port} does not see the replica up"
        except (OSError, redis.RedisError, StopIteration, KeyError) as exc:
            return repr(exc)
        return None


def _listed(entry: object, port: int) -> bool:
    """A ``SENTINEL REPLICAS`` entry for the replica on ``port``, up."""
    state = entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2], strict=True))  # type: ignore[index]
    flags = str(state.get("flags", ""))
    return int(state.get("port", 0)) == port and "s_down" not in flags and "disconnected" not in flags


def _info(node: RedisServer) -> dict[str, object]:
    with node._client() as client:
        info: dict[str, object] = client.info("replication")
        return info


def _fresh(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return directory
