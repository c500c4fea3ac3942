"""aiobootstrap's SGLang plugin inside SGLang as released (compat/engines.txt), through SGLang's own loader.

Each SGLang process is a fresh subprocess (``sglang_plugin_child.py``): SGLang loads its plugins once a
process, from the installed distributions' entry points (aiobootstrap's from its installed wheel), with the
environment the test gives it, then constructs its servers where SGLang does (``start_disagg_service()``
for the Mooncake and NIXL backends on a published prefill ``ServerArgs``, the engine module's
``EngineInfoBootstrapServer``, the encoder bootstrap server). No class of SGLang's is faked.

- Without any aiobootstrap setting, SGLang's classes are its own and nothing of aiobootstrap's server is
  imported.
- With ``AIOBOOTSTRAP_STORE`` alone (which enables the plugin), two SGLang processes on one Redis
  (``testbed/redis_server.py``'s, from the checkout): each constructs aiobootstrap's servers, subclasses of
  SGLang's (SGLang's ``issubclass`` decisions unchanged), serving SGLang's wire and ``wait=``; what one
  process's server is told the other's answers (the same registry), the encoder list SGLang's receiver
  reads included.
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
from released import HOST, environment, tp2_place, use_testbed
from released import quiet_port as free_port

CHILD = Path(__file__).with_name("sglang_plugin_child.py")
STARTUP = 600.0
"""Seconds a child may take to import SGLang's engine and report (tens of seconds on a busy machine)."""
WAIT = 60
"""The ``wait=`` of the tests' parked gets: far longer than any registration takes to arrive."""
DROP_IN = "aiobootstrap.plugins.dropins"


class Child:
    """One SGLang process running ``sglang_plugin_child.py``."""

    def __init__(self, spec: dict[str, Any], environ: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), json.dumps(spec)],
            env=environ,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=CHILD.parent,
        )
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    def line(self, prefix: str) -> Any:
        """The JSON after ``prefix`` on the next such line of the child's output."""
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(prefix + " "):
                return json.loads(line[len(prefix) + 1 :])
        self.process.wait(timeout=STARTUP)
        raise AssertionError(f"the child exited ({self.process.returncode}):\n{''.join(self.stderr)[-6000:]}")

    def ask(self, command: str, prefix: str) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.line(prefix)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.write("stop\n")
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=60)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

    def warnings(self) -> list[str]:
        """The aiobootstrap plugin's own lines on the child's stderr."""
        return [line for line in self.stderr if "aiobootstrap plugin" in line]


@contextlib.contextmanager
def children(*started: tuple[dict[str, Any], dict[str, str]]) -> Iterator[list[tuple[Child, Any]]]:
    """The children started side by side, each with its report, stopped at the end."""
    running = [Child(spec, environ) for spec, environ in started]
    try:
        yield [(child, child.line("REPORT")) for child in running]
    finally:
        for child in running:
            child.stop()


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server of the checkout's testbed (the test machine's own Redis is never touched)."""
    use_testbed()
    from testbed.redis_server import REDIS_SERVER, SKIP_REASON, RedisServer

    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def fleet(redis_url: str) -> Iterator[list[tuple[Child, Any]]]:
    """Two SGLang processes with only ``AIOBOOTSTRAP_STORE`` set, serving: the first imports SGLang's
    engine module before ``load_plugins()``, the second after it."""
    ports = [{"mooncake": free_port(), "nixl": free_port()} for _ in range(2)]
    environ = environment(AIOBOOTSTRAP_STORE=redis_url)
    with children(
        ({"engine_first": True, "serve": True, "prefill_ports": ports[0]}, environ),
        ({"engine_first": False, "serve": True, "prefill_ports": ports[1]}, environ),
    ) as running:
        yield running


def url(report: dict[str, Any], server: str) -> str:
    return f"http://{HOST}:{report['servers'][server]['port']}"


def parked(base: str, namespace: str) -> float:
    """The gets parked in ``namespace`` on the server at ``base`` right now (its ``/metrics``)."""
    for line in requests.get(f"{base}/metrics", timeout=30).text.splitlines():
        if line.startswith(f'aiobootstrap_parked_waiters{{namespace="{namespace}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def get_while_put(get: str, base: str, put: Any, namespace: str = "default") -> requests.Response:
    """``get`` (a ``wait=`` get) sent first and parked on the server at ``base``, then ``put()`` called: the
    get's reply, which only the put can have made a 200."""
    replies: list[requests.Response] = []
    waiting = threading.Thread(target=lambda: replies.append(requests.get(get, timeout=WAIT + 30)))
    waiting.start()
    while not parked(base, namespace) and waiting.is_alive():
        time.sleep(0.02)  # another process's server: its /metrics is how it tells a get has parked
    put()
    waiting.join(WAIT + 60)
    return replies[0]


# ---- without a setting: SGLang's own ----


def test_without_a_setting_sglangs_classes_are_its_own() -> None:
    with children(({"engine_first": True}, environment())) as [(child, report)]:
        assert report["engine_info"][0] == (
            "sglang.srt.entrypoints.engine_info_bootstrap_server.EngineInfoBootstrapServer"
        )
        assert report["encoder"][0] == "sglang.srt.disaggregation.encoder.receiver.EncoderBootstrapServer"
        assert (
            report["kv"]["mooncake"][0] == "sglang.srt.disaggregation.mooncake.conn.MooncakeKVBootstrapServer"
        )
        assert report["kv"]["nixl"][0] == "sglang.srt.disaggregation.nixl.conn.NixlKVBootstrapServer"
        assert report["rust_server_serves"] == {"mooncake": True, "nixl": True}
        assert report["hooks"] == []
        assert report["aiobootstrap_server_imported"] is False
        assert child.warnings() == []


# ---- with AIOBOOTSTRAP_STORE: aiobootstrap's, on one registry ----


def test_sglang_constructs_aiobootstraps_servers_as_subclasses_of_its_own(
    fleet: list[tuple[Child, Any]],
) -> None:
    for child, report in fleet:
        assert report["hooks"] == [
            "sglang.srt.disaggregation.encoder.receiver.EncoderBootstrapServer",
            "sglang.srt.disaggregation.utils.get_kv_class",
            "sglang.srt.entrypoints.engine_info_bootstrap_server.EngineInfoBootstrapServer",
        ]
        # The engine module's own name (imported before load_plugins in the first child, after in the second).
        assert report["engine_info"][:2] == [
            f"{DROP_IN}.EngineInfoBootstrapServer",
            "aiobootstrap.server.threaded.ThreadedBootstrapServer",
        ]
        assert (
            "sglang.srt.entrypoints.engine_info_bootstrap_server.EngineInfoBootstrapServer"
            in report["engine_info"]
        )
        assert report["encoder"][:2] == [
            f"{DROP_IN}.EncoderBootstrapServer",
            "aiobootstrap.server.faces.encoders.inprocess.EncoderBootstrapServer",
        ]
        assert "sglang.srt.disaggregation.encoder.receiver.EncoderBootstrapServer" in report["encoder"]
        for backend, own in (("mooncake", "MooncakeKVBootstrapServer"), ("nixl", "NixlKVBootstrapServer")):
            assert report["kv"][backend][:2] == [
                f"{DROP_IN}.{own}",
                "aiobootstrap.server.faces.prefill.inprocess.PrefillBootstrapServer",
            ]
            assert f"sglang.srt.disaggregation.{backend}.conn.{own}" in report["kv"][backend]
            assert report["servers"][f"prefill_{backend}"]["mro"] == report["kv"][backend]
        # SGLang's own decision (SGLANG_RUST_SERVER's registry stands in for a CommonKVBootstrapServer): unchanged.
        assert report["kv_is_common"] == {"mooncake": True, "nixl": True}
        assert report["rust_server_serves"] == {"mooncake": True, "nixl": True}
        assert report["servers"]["engine_info"]["mro"] == report["engine_info"]
        assert report["servers"]["encoder"]["mro"] == report["encoder"]
        assert child.warnings() == []


def test_the_engine_info_server_serves_sglangs_wire_and_waits(fleet: list[tuple[Child, Any]]) -> None:
    """A getter parked on one process's server is answered by a rank registering at the other's, with the
    body SGLang's ranks send and the reply SGLang's getters read."""
    (_, first), (_, second) = fleet
    registered = {
        "tp_rank": 3,
        "transfer_engine_info": {"session_id": "10.0.0.3:17000", "weights_info_dict": {"w": [1, 2]}},
    }

    def put() -> None:
        reply = requests.put(
            f"{url(second, 'engine_info')}/register_transfer_engine_info", json=registered, timeout=30
        )
        assert (reply.status_code, reply.text) == (200, "OK")

    got = get_while_put(
        f"{url(first, 'engine_info')}/get_transfer_engine_info?rank=3&wait={WAIT}",
        url(first, "engine_info"),
        put,
    )
    assert got.status_code == 200
    body = got.json()
    assert (body["rank"], body["remote_instance_transfer_engine_info"]) == (
        3,
        ["10.0.0.3:17000", {"w": [1, 2]}],
    )


def prefill_body(tp_rank: int, port: int) -> dict[str, Any]:
    """A prefill rank's ``PUT /route`` as SGLang 0.5.23's ``register_to_bootstrap`` sends it (TP 2)."""
    return {
        **tp2_place(tp_rank),
        "rank_ip": "10.0.0.1",
        "rank_port": port,
        "page_size": 64,
        "kv_cache_dtype": "auto",
        "load_balance_method": "follow_bootstrap_room",
        "kv_layout": None,
        "dsv41_spec_layout": None,
        "decode_allocation_policy": "early",
        "enable_dsa_cache_layer_split": False,
        "enable_kv_cache_sharding": False,
        "prefill_http_port": 30000,
    }


ALL = "/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1"
"""decode's query for the parallel info (SGLang 0.5.23's ``try_ensure_parallel_info``)."""


@pytest.mark.parametrize("backend", ["mooncake", "nixl"])
def test_the_prefill_server_serves_sglangs_wire_and_waits(
    fleet: list[tuple[Child, Any]], backend: str
) -> None:
    """What start_disagg_service() constructed: decode's parallel-info get, parked on one process's server,
    answered once both ranks have registered, the second at the other process's server."""
    (_, first), (_, second) = fleet
    # Mooncake's deployment on the unprefixed routes SGLang asks; NIXL's apart from it on the one store.
    namespace = "default" if backend == "mooncake" else "plugin-nixl"
    prefix = "" if namespace == "default" else f"/ns/{namespace}"
    own = f"{url(first, f'prefill_{backend}')}{prefix}"
    other = f"{url(second, f'prefill_{backend}')}{prefix}"
    assert requests.put(f"{own}/route", json=prefill_body(0, 17000), timeout=30).status_code == 200

    def put() -> None:
        assert requests.put(f"{other}/route", json=prefill_body(1, 17001), timeout=30).status_code == 200

    got = get_while_put(f"{own}{ALL}&wait={WAIT}", url(first, f"prefill_{backend}"), put, namespace)
    assert got.status_code == 200
    info = got.json()
    assert (info["attn_tp_size"], info["pp_size"], info["page_size"]) == (2, 1, 64)
    rank = requests.get(
        f"{other}/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=1&target_pp_rank=0", timeout=30
    )
    assert rank.json()["rank_port"] == 17001
    unprefixed = requests.get(f"{url(first, f'prefill_{backend}')}/health", timeout=30)
    assert unprefixed.status_code == 200


def test_the_encoder_list_sglang_reads_follows_the_registry(fleet: list[tuple[Child, Any]]) -> None:
    """An encoder registering at one process's encoder server is in the list the other process's server
    keeps in place (the list SGLang's receiver reads), through the store."""
    (first_child, first), (_, second) = fleet
    encoder = "http://10.0.0.9:30002"
    listed = requests.get(f"{url(first, 'encoder')}/list_encoder_urls", timeout=30).json()
    reply = requests.post(
        f"{url(second, 'encoder')}/register_encoder_url", json={"url": encoder + "/"}, timeout=30
    )
    assert reply.status_code == 200
    changed = requests.get(
        f"{url(first, 'encoder')}/list_encoder_urls?after={listed['version']}&wait={WAIT}", timeout=WAIT + 30
    ).json()
    assert encoder in changed["encoder_urls"]
    for _ in range(100):  # the in-place list is rewritten as the change lands, a read task after the reply
        if encoder in first_child.ask("urls", "URLS"):
            break
        time.sleep(0.05)
    assert encoder in first_child.ask("urls", "URLS")


def test_a_namespace_is_served_where_sglang_has_its_servers_listen(redis_url: str) -> None:
    """With AIOBOOTSTRAP_NAMESPACE the address SGLang gives each server is that namespace's: a rank
    registering there, unprefixed as SGLang's ranks do, is the namespace's in the store; the encoder server
    is aiobootstrap's too, keeping that namespace's list in place."""
    ports = {"mooncake": free_port()}
    engine_info_port = free_port()
    spec = {"serve": True, "prefill_ports": ports, "engine_info_port": engine_info_port, "encoder": False}
    environ = environment(AIOBOOTSTRAP_STORE=redis_url, AIOBOOTSTRAP_NAMESPACE="pd-7")
    with children((spec, environ)) as [(child, report)]:
        assert report["encoder"][0] == f"{DROP_IN}.EncoderBootstrapServer"
        assert report["kv"]["mooncake"][0] == f"{DROP_IN}.MooncakeKVBootstrapServer"
        assert not [line for line in child.warnings() if "is not replaced" in line]
        engine_info = report["servers"]["engine_info"]
        registered = {"tp_rank": 0, "transfer_engine_info": {"session_id": "s-0", "weights_info_dict": {}}}
        reply = requests.put(
            f"http://{HOST}:{engine_info_port}/register_transfer_engine_info", json=registered, timeout=30
        )
        assert reply.text == "OK"
        own = engine_info["url"]
        assert requests.get(f"{own}/ns/pd-7/get_transfer_engine_info?rank=0", timeout=30).status_code == 200
        assert requests.get(f"{own}/get_transfer_engine_info?rank=0", timeout=30).status_code == 404
        prefill = f"http://{HOST}:{ports['mooncake']}"
        for tp_rank in (0, 1):
            put = requests.put(f"{prefill}/route", json=prefill_body(tp_rank, 17000 + tp_rank), timeout=30)
            assert put.status_code == 200
        rank = "/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=0&target_pp_rank=0"
        assert requests.get(f"{prefill}{rank}", timeout=30).json()["rank_port"] == 17000
        main = report["servers"]["prefill_mooncake"]["url"]
        assert requests.get(f"{main}/ns/pd-7{rank}", timeout=30).json()["rank_port"] == 17000


@contextlib.contextmanager
def external_server(listen: str) -> Iterator[str]:
    """``python -m aiobootstrap --port 0 --listen LISTEN`` (the installed one): its main URL once it listens."""
    process = subprocess.Popen(
        [sys.executable, "-m", "aiobootstrap", "--port", "0", "--listen", listen],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=CHILD.parent,
    )
    try:
        assert process.stdout is not None
        main = process.stdout.readline().strip()
        assert main.startswith("aiobootstrap listening on "), main
        assert "also listening on" in process.stdout.readline()
        yield main.removeprefix("aiobootstrap listening on ")
    finally:
        process.terminate()
        process.wait(timeout=60)
        if process.stdout is not None:
            process.stdout.close()


def test_an_external_server_serves_the_prefill_side_sglang_binds_nothing() -> None:
    """With AIOBOOTSTRAP_EXTERNAL_PREFILL=1 what start_disagg_service() constructs binds nothing (still a
    subclass of SGLang's class, its Rust-server decision unchanged): an external aiobootstrap listening on
    the address SGLang's prefill ranks register at (--listen) serves the deployment in its namespace."""
    port = free_port()
    spec = {"serve": True, "prefill_ports": {"mooncake": port}, "encoder": False}
    with external_server(f"{HOST}:{port}=pd-9") as main:
        environ = environment(AIOBOOTSTRAP_ENGINE="1", AIOBOOTSTRAP_EXTERNAL_PREFILL="1")
        with children((spec, environ)) as [(child, report)]:
            assert report["servers"]["prefill_mooncake"]["mro"][:2] == [
                f"{DROP_IN}.MooncakeKVBootstrapServer",
                "aiobootstrap.plugins.sglang_targets.ServedElsewhere",
            ]
            assert (
                "sglang.srt.disaggregation.mooncake.conn.MooncakeKVBootstrapServer"
                in report["kv"]["mooncake"]
            )
            assert report["rust_server_serves"]["mooncake"] is True
            assert child.warnings() == []
            prefill = f"http://{HOST}:{port}"
            for tp_rank in (0, 1):
                put = requests.put(
                    f"{prefill}/route", json=prefill_body(tp_rank, 17000 + tp_rank), timeout=30
                )
                assert put.status_code == 200
            assert requests.get(f"{prefill}{ALL}", timeout=30).json()["attn_tp_size"] == 2
            assert requests.get(f"{main}/ns/pd-9{ALL}", timeout=30).json()["attn_tp_size"] == 2
