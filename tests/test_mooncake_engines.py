"""Real Mooncake transfer engines (``mooncake-transfer-engine-non-cuda`` from PyPI, TCP transport, no GPU),
each in a process of its own, rendezvous through aiobootstrap's ``/metadata``: one writes bytes into the
other's registered buffer and they arrive intact, also when the engine written to was found through a
restarted aiobootstrap (file store, Redis). Where the wheel cannot load, these skip with a reason that
starts with "mooncake" (and .ci/run fails on it)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.etcd_server import Cluster, unique_prefix
from testbed.ports import quiet_port
from testbed.redis_server import RedisServer

from .helpers.cli import serve
from .helpers.waits import GUARD

try:
    from mooncake.engine import TransferEngine  # noqa: F401  (a wheel that loads: libibverbs present)

    _MISSING = None
except (ImportError, OSError) as exc:  # the wheel absent, or libibverbs1 missing
    _MISSING = f"mooncake transfer engine unavailable: {exc} (pip install mooncake-transfer-engine-non-cuda; Debian: libibverbs1)"

pytestmark = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")

SIZE = 1 << 16


class Engine:
    """One transfer engine process (``tests/helpers/mooncake_engine.py``)."""

    def __init__(self, metadata: str, name: str | None = None) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.helpers.mooncake_engine",
                metadata,
                str(SIZE),
                *([name] if name else []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).parent.parent,
        )
        self.hello = self._line()
        assert "name" in self.hello, (self.hello, self._stderr())
        self.name: str = self.hello["name"]
        self.buffer: int = self.hello["buffer"]

    def _line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        return json.loads(line) if line else {"exited": self.process.poll()}

    def _stderr(self) -> str:
        self.process.kill()
        return self.process.communicate(timeout=GUARD)[1][-3000:]

    def _ask(self, line: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self._line()

    def write(self, peer: Engine, data: bytes) -> int:
        return int(self._ask(f"write {peer.name} {peer.buffer} {data.hex()}")["result"])

    def read(self, count: int) -> bytes:
        return bytes.fromhex(self._ask(f"read {count}")["hex"])

    def stderr_lines(self) -> list[str]:
        """What the engine logged (once closed): glog's warnings and errors start with W and E."""
        return [line for line in self._stderr_text.splitlines() if line[:1] in "WE"]

    def close(self) -> None:
        self._stderr_text = getattr(self, "_stderr_text", "")
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # a normal exit: the engine deletes its metadata
            try:
                self.process.wait(GUARD)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr is not None and not self.process.stderr.closed:
            self._stderr_text = self.process.stderr.read()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None and not stream.closed:
                with contextlib.suppress(BrokenPipeError):  # a killed engine's stdin
                    stream.close()


@pytest.fixture
def engines() -> Iterator[list[Engine]]:
    made: list[Engine] = []
    yield made
    for engine in made:
        engine.close()


def _stop(served: Any) -> None:
    served.process.send_signal(signal.SIGTERM)
    served.process.communicate(timeout=GUARD)


def test_two_engines_move_bytes_through_aiobootstrap(engines: list[Engine]) -> None:
    served = serve()
    try:
        engines += [Engine(f"{served.url}/metadata"), Engine(f"{served.url}/ns/pd-0/metadata")]
        receiver, sender = engines
        assert sender.write(receiver, b"not in the same namespace") != 0  # each namespace its own engines
        engines.append(Engine(f"{served.url}/metadata"))
        data = bytes(range(256)) * 16
        assert engines[2].write(receiver, data) == 0
        assert receiver.read(len(data)) == data
    finally:
        for engine in engines:
            engine.close()
        _stop(served)


@pytest.mark.parametrize("store", ["file", "redis", "etcd"])
def test_an_engine_is_found_after_aiobootstrap_restarts(
    engines: list[Engine], store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The engine registered before the restart is found by one started after it, on a durable store."""
    if store == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        options = ["--store", redis.url]
    elif store == "etcd":
        etcd: Cluster = request.getfixturevalue("shared_etcd")
        options = ["--store", etcd.url(unique_prefix())]
    else:
        options = ["--state-file", str(tmp_path / "state")]
    port = str(quiet_port())
    served = serve(*options, "--port", port)
    try:
        engines.append(Engine(f"{served.url}/metadata"))
        _stop(served)
        served = serve(*options, "--port", port)
        engines.append(Engine(f"{served.url}/metadata"))
        receiver, sender = engines
        assert sender.write(receiver, b"after the restart") == 0
        assert receiver.read(17) == b"after the restart"
    finally:
        for engine in engines:
            engine.close()
        _stop(served)


def test_a_killed_engine_leaves_and_its_name_can_start_again(engines: list[Engine]) -> None:
    """Probing on: an engine SIGKILLed (it sends nothing) has its keys deleted after 3 failed probes, and an
    engine restarted under its name initializes (Mooncake's server refuses it as a duplicate for ever); a
    live engine probed meanwhile keeps transferring and logs nothing about the probes."""
    served = serve("--mooncake-probe-interval", "0.3", "--mooncake-probe-timeout", "1")
    try:
        metadata = f"{served.url}/metadata"
        engines += [Engine(metadata), Engine(metadata)]
        killed, live = engines
        killed.process.kill()
        killed.process.wait(GUARD)
        _await_deleted(served.url, f"mooncake/ram/{killed.name}")
        again = Engine(metadata, name=killed.name)
        engines.append(again)
        assert live.write(again, b"after the probes") == 0
        assert again.read(16) == b"after the probes"
    finally:
        for engine in engines:
            engine.close()
        _stop(served)
    noise = [line for line in live.stderr_lines() if "andshake" in line or "ocket" in line]
    assert noise == [], noise


def _await_deleted(url: str, key: str) -> None:
    """Until the server's watch tells ``key`` deleted."""
    after, deadline = 0, time.monotonic() + 30
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/watch?after={after}&wait=10", timeout=20) as reply:
            body = json.loads(reply.read())
        after = body["version"]
        if any(c.get("key") == key and c["op"] == "delete" for c in body["changes"]):
            return
    raise AssertionError(f"{key} was not deleted")
