"""Helpers for the compat suite: the engines' released servers started as the engines start them.

The engines' servers give no sign when they listen (SGLang's ``CommonKVBootstrapServer`` binds in the
thread its constructor starts), so :func:`wait_listening` connects until the port answers, within a bound.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

HOST = "127.0.0.1"


def tp2_place(tp_rank: int) -> dict[str, int]:
    """Where a rank of a TP-2 prefill deployment sits (one dp, cp and pp rank): the sizes and ranks SGLang's
    prefill registers, by the names of its ``PUT /route`` body (and of ``CommonKVManager``'s attributes)."""
    return {
        "attn_tp_size": 2,
        "attn_tp_rank": tp_rank,
        "attn_cp_size": 1,
        "attn_cp_rank": 0,
        "attn_dp_size": 1,
        "attn_dp_rank": 0,
        "pp_size": 1,
        "pp_rank": 0,
        "system_dp_size": 1,
        "system_dp_rank": 0,
    }


CHECKOUT = Path(__file__).resolve().parents[2]
"""The checkout the suite runs from: its ``testbed`` (ports, a Redis), never its ``aiobootstrap`` (the wheel's)."""


def use_testbed() -> None:
    """The checkout's ``testbed`` importable, after the installed packages: ``aiobootstrap`` stays the wheel's."""
    if str(CHECKOUT) not in sys.path:
        sys.path.append(str(CHECKOUT))


_TAKEN: set[int] = set()
"""The ports :func:`quiet_port` gave in this process."""


def quiet_port() -> int:
    """A port below the ephemeral range (the checkout's ``testbed.ports``): the port a child is told to bind
    cannot be taken meanwhile by another child's connection or ``port=0`` server."""
    use_testbed()
    from testbed.ports import quiet_port as testbed_port

    return testbed_port(_TAKEN)


def environment(**settings: str) -> dict[str, str]:
    """This process's environment without any aiobootstrap setting, plus ``settings``; offline."""
    kept = {name: value for name, value in os.environ.items() if not name.startswith("AIOBOOTSTRAP_")}
    return {**kept, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **settings}


def free_port() -> int:
    """A port free now on the loopback (for servers that cannot be given port 0 and tell the port bound)."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def wait_listening(port: int, host: str = HOST, within: float = 30.0) -> None:
    """Return once ``host:port`` accepts a connection; ``TimeoutError`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {within} s") from None
            time.sleep(0.01)


@dataclasses.dataclass(frozen=True)
class Reply:
    """A reply as the engines' clients read it: the status, and the JSON when it is JSON, else the text."""

    status: int
    body: Any

    @classmethod
    def of(cls, response: requests.Response) -> Reply:
        if response.headers.get("Content-Type", "").startswith("application/json"):
            try:
                return cls(response.status_code, response.json())
            except ValueError:
                pass
        return cls(response.status_code, response.text)


def ask(addr: str, method: str, path: str, json: Any = None) -> Reply:
    """One request to the server at ``addr`` (``host:port``), with ``requests`` as SGLang's clients send it."""
    return Reply.of(requests.request(method, f"http://{addr}{path}", json=json, timeout=30))


@contextlib.contextmanager
def sglang_prefill_server() -> Iterator[str]:
    """SGLang's own ``CommonKVBootstrapServer`` as its prefill side starts it; yields its ``host:port``."""
    from sglang.srt.disaggregation.common.conn import CommonKVBootstrapServer

    port = free_port()
    server = CommonKVBootstrapServer(HOST, port)
    try:
        wait_listening(port)
        yield f"{HOST}:{port}"
    finally:
        server.close()


@contextlib.contextmanager
def aiobootstrap_prefill_server() -> Iterator[str]:
    """aiobootstrap's drop-in, ``PrefillBootstrapServer(host, port)``; yields its ``host:port``."""
    from aiobootstrap import PrefillBootstrapServer

    server = PrefillBootstrapServer(HOST, 0)
    try:
        yield f"{HOST}:{server.port}"
    finally:
        server.close()


LISTENING = "aiobootstrap listening on "


@contextlib.contextmanager
def aiobootstrap_cli_server() -> Iterator[str]:
    """``python -m aiobootstrap`` as an operator runs an external server (every face, the default namespace), on
    a port of its choosing; yields its ``host:port``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "aiobootstrap", "--host", HOST, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith(LISTENING), f"python -m aiobootstrap did not start: {line!r}"
        yield line.removeprefix(LISTENING).strip().removeprefix("http://")
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def sglang_engine_info_server() -> Iterator[tuple[str, Any]]:
    """SGLang's own ``EngineInfoBootstrapServer`` (FastAPI in a thread) as its engine starts it; yields its
    ``host:port`` and the object (the engine reads it in-process too)."""
    from sglang.srt.entrypoints.engine_info_bootstrap_server import EngineInfoBootstrapServer

    port = free_port()
    server = EngineInfoBootstrapServer(HOST, port)
    try:
        wait_listening(port)
        yield f"{HOST}:{port}", server
    finally:
        server.close()


@contextlib.contextmanager
def aiobootstrap_engine_info_server() -> Iterator[tuple[str, Any]]:
    """aiobootstrap's drop-in for it, ``ThreadedBootstrapServer(host, port)``."""
    from aiobootstrap import ThreadedBootstrapServer

    server = ThreadedBootstrapServer(HOST, 0)
    try:
        yield f"{HOST}:{server.port}", server
    finally:
        server.close()
