"""``VllmBootstrapServer``: vLLM's ``MooncakeBootstrapServer`` interface, in-process: ``start()`` listening
when it returns (a taken port an ``OSError``, as vLLM's), ``port`` after a port-0 start, ``workers`` a
read-only view of what ``/query`` answers, ``shutdown()`` freeing the port; vLLM's (config, host, port)
call, and its port variable as the default."""

from __future__ import annotations

import json
import socket
import urllib.request
from typing import Any

import pytest

from aiobootstrap.server.faces.vllm.inprocess import VllmBootstrapServer
from aiobootstrap.server.faces.vllm.settings import default_port
from aiobootstrap.wire.vllm import Engine


def _post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return reply.status, reply.read()


def test_start_register_query_and_shutdown_frees_the_port() -> None:
    server = VllmBootstrapServer("127.0.0.1", 0)
    assert dict(server.workers) == {}
    server.start()
    server.start()  # a second start does nothing, as vLLM's
    try:
        port = server.port
        assert port != 0
        body = {"engine_id": "e", "dp_rank": 0, "tp_rank": 1, "pp_rank": 0, "addr": "tcp://h:1"}
        assert _post(f"http://127.0.0.1:{port}/register", body) == (200, b'{"status":"ok"}')
        workers = server.workers
        assert workers == {0: Engine("e", {1: {0: "tcp://h:1"}})}
        assert workers[0].engine_id == "e"
        with pytest.raises(TypeError):
            workers[1] = Engine("x", {})  # type: ignore[index]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/query", timeout=10) as reply:
            assert reply.read() == b'{"0":{"engine_id":"e","worker_addr":{"1":{"0":"tcp://h:1"}}}}'
    finally:
        server.shutdown()
    server.shutdown()  # idempotent
    with socket.create_server(("127.0.0.1", port)):
        pass  # the port is free again


def test_a_taken_port_raises_oserror_from_start() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        server = VllmBootstrapServer(object(), "127.0.0.1", port)  # vLLM's (vllm_config, host, port)
        with pytest.raises(OSError, match=str(port)):
            server.start()
        assert server.port == port


def test_vllms_port_variable_is_the_default_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_MOONCAKE_BOOTSTRAP_PORT", "18998")
    assert VllmBootstrapServer("127.0.0.1").port == 18998
    monkeypatch.delenv("VLLM_MOONCAKE_BOOTSTRAP_PORT")
    assert VllmBootstrapServer().port == 8998
    with pytest.raises(ValueError, match="VLLM_MOONCAKE_BOOTSTRAP_PORT"):
        default_port({"VLLM_MOONCAKE_BOOTSTRAP_PORT": "eighty"})
    with pytest.raises(TypeError):
        VllmBootstrapServer(1, 2, 3, 4)
