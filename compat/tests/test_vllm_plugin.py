"""aiobootstrap's vLLM plugin inside vLLM as released (compat/engines.txt), through vLLM's own loader.

Each vLLM process is a fresh subprocess (``vllm_plugin_child.py``): vLLM loads its general plugins once a
process, from the installed distributions' entry points (aiobootstrap's from its installed wheel), then its
Mooncake connector constructs its bootstrap server. No class of vLLM's is faked.

- Without any aiobootstrap setting, ``MooncakeBootstrapServer`` is vLLM's own, in ``mooncake_utils`` and
  in ``mooncake_connector``, and nothing of aiobootstrap's server is imported.
- With ``AIOBOOTSTRAP_ENGINE=1`` it is aiobootstrap's ``VllmBootstrapServer`` in both modules, whether the
  connector imported the name before the plugins ran or after; constructed and started as the connector
  does, it serves vLLM's ``/register`` and ``/query``, and ``wait=``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from released import HOST, environment
from released import quiet_port as free_port

CHILD = Path(__file__).with_name("vllm_plugin_child.py")
STARTUP = 600.0
"""Seconds a child may take to import vLLM's connector and report."""
WAIT = 60
OWN = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_utils.MooncakeBootstrapServer"
OURS = [
    "aiobootstrap.plugins.dropins.MooncakeBootstrapServer",
    "aiobootstrap.server.faces.vllm.inprocess.VllmBootstrapServer",
]


@contextlib.contextmanager
def child(spec: dict[str, Any], environ: dict[str, str]) -> Iterator[dict[str, Any]]:
    """A vLLM process running ``vllm_plugin_child.py``: its report, and its stop at the end."""
    process = subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(spec)],
        env=environ,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=CHILD.parent,
    )
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.extend(process.stderr or []), daemon=True)
    reader.start()
    try:
        assert process.stdout is not None
        report = None
        for line in process.stdout:
            if line.startswith("REPORT "):
                report = json.loads(line[len("REPORT ") :])
                break
        if report is None:
            process.wait(timeout=STARTUP)
            raise AssertionError(f"the child exited ({process.returncode}):\n{''.join(errors)[-6000:]}")
        report["plugin_lines"] = [line for line in errors if "aiobootstrap plugin" in line]
        yield report
    finally:
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.write("stop\n")
            process.stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=60)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_without_a_setting_vllms_class_is_its_own() -> None:
    with child({"connector_first": True}, environment()) as report:
        assert report["utils"][0] == OWN
        assert report["connector_holds_the_same"] is True
        assert report["aiobootstrap_server_imported"] is False
        assert report["plugin_lines"] == []


@pytest.mark.parametrize(
    "connector_first", [True, False], ids=["connector-imported-first", "connector-imported-after"]
)
def test_the_connectors_class_is_aiobootstraps(connector_first: bool) -> None:
    with child({"connector_first": connector_first}, environment(AIOBOOTSTRAP_ENGINE="1")) as report:
        assert report["utils"][:2] == OURS
        assert report["connector_holds_the_same"] is True
        assert report["plugin_lines"] == []


def parked(base: str, namespace: str) -> float:
    """The gets parked in ``namespace`` on the server at ``base`` right now (its ``/metrics``)."""
    for line in requests.get(f"{base}/metrics", timeout=30).text.splitlines():
        if line.startswith(f'aiobootstrap_parked_waiters{{namespace="{namespace}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("namespace", [None, "vllm-3"], ids=["unprefixed", "AIOBOOTSTRAP_NAMESPACE"])
def test_the_server_the_connector_starts_serves_vllms_wire_and_waits(namespace: str | None) -> None:
    """As the connector's prefill side starts it; a decode's /query waiting for a TP 2 engine is answered once
    both workers registered, with vLLM's reply. With AIOBOOTSTRAP_NAMESPACE the address vLLM gives it is
    that namespace's."""
    port = free_port()
    settings = {"AIOBOOTSTRAP_ENGINE": "1"} | (
        {} if namespace is None else {"AIOBOOTSTRAP_NAMESPACE": namespace}
    )
    with child({"serve": True, "port": port}, environment(**settings)) as report:
        assert report["server"]["mro"][:2] == OURS
        base = f"http://{HOST}:{port}"
        own = report["server"]["url"]
        replies: list[requests.Response] = []
        waiting = threading.Thread(
            target=lambda: replies.append(
                requests.get(f"{base}/query?tp_size=2&wait={WAIT}", timeout=WAIT + 30)
            )
        )
        waiting.start()
        while not parked(own, namespace or "default") and waiting.is_alive():
            time.sleep(0.02)  # another process's server: its /metrics is how it tells a get has parked
        for tp_rank in (0, 1):
            worker = {
                "engine_id": "e-1",
                "dp_rank": 0,
                "tp_rank": tp_rank,
                "pp_rank": 0,
                "addr": f"10.0.0.1:{17000 + tp_rank}",
            }
            reply = requests.post(f"{base}/register", json=worker, timeout=30)
            assert reply.status_code == 200, reply.text
        waiting.join(WAIT + 60)
        assert replies[0].status_code == 200
        engines = {
            "0": {
                "engine_id": "e-1",
                "worker_addr": {"0": {"0": "10.0.0.1:17000"}, "1": {"0": "10.0.0.1:17001"}},
            }
        }
        assert replies[0].json() == engines
        if namespace is not None:
            assert requests.get(f"{own}/ns/{namespace}/query", timeout=30).json() == engines
            assert requests.get(f"{own}/query", timeout=30).json() == {}
