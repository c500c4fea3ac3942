"""vLLM's Mooncake connector bootstrap, as released (compat/engines.txt), beside aiobootstrap's vLLM face.

Both servers are started the way vLLM starts its own, in a thread of this process: vLLM's
``MooncakeBootstrapServer(host, port).start()`` from the release's ``mooncake_utils.py``, and aiobootstrap's
drop-in ``VllmBootstrapServer(host, port).start()``. The checks:

- vLLM's server module imports with FastAPI, uvicorn and pydantic once its two vLLM imports are given
  (``EngineId``, ``init_logger``), and nothing else of vLLM or torch (in a child interpreter);
- an automated diff: one scripted sequence of requests sent to both servers, every reply compared where
  vLLM's code reads it (status, JSON, the sentences), the differences SPEC section 15 makes on purpose
  named, each with what each side answers;
- vLLM's released worker registration and decode query,
  ``MooncakeConnectorWorker.register_worker_with_bootstrap`` and ``._connect_to_prefiller_bootstrap``
  (``mooncake_connector.py``), run against both servers on a ``SimpleNamespace`` holding the attributes
  each reads, and their conclusions compared (registered or refused with which status and sentence;
  decode's ``_remote_agents`` and the TP size it derives, ``_tp_size``). The same checks also run **our own
  equivalents of the two functions, written from issue 38's description** of what they send and read
  (:class:`Equivalents`, not vLLM's code); where ``mooncake_connector`` does not import (it needs more of
  vLLM's dependencies than vLLM's own server does: ``cbor2``, ``openai>=2.25``...), the released variant is
  skipped with the import's error, and the equivalents alone stand for vLLM's functions.
- the same functions through ``--listen``: two deployments, each with dp rank 0, on one aiobootstrap, each
  at a listener's ``host:port`` (all vLLM can name), each decode learning its own deployment alone.

The workers' side channels are real ZMQ ROUTER sockets (``pyzmq``), bound to random ports as vLLM's worker
binds its own: aiobootstrap connects to them to tell a live engine from a dead one.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import subprocess
import sys
import textwrap
import types
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import zmq
from released import HOST, free_port

UTILS = "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_utils.py"
CONNECTOR = "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector"
STUBS: dict[str, dict[str, Any]] = {
    "vllm.distributed.kv_transfer.kv_connector.utils": {"EngineId": str},
    "vllm.logger": {"init_logger": logging.getLogger},
}
"""The two names ``mooncake_utils`` imports from the rest of vLLM (``EngineId`` is ``str`` there)."""


def vllm_file(relative: str) -> Path:
    """A file of the installed vLLM (found without importing the package)."""
    spec = importlib.util.find_spec("vllm")
    assert spec is not None, "vLLM is not installed: run the compat suite with `make compat`"
    assert spec.origin is not None
    return Path(spec.origin).parent.parent / relative


def load_utils() -> types.ModuleType:
    """vLLM's ``mooncake_utils``, its file imported under a name of its own with the two names in
    ``sys.modules`` for the while (the real modules, when imported already, are left as they are)."""
    path = vllm_file(UTILS)
    added: list[str] = []
    for name, attributes in STUBS.items():
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            package = ".".join(parts[:depth])
            if package in sys.modules:
                continue
            module = types.ModuleType(package)
            if depth < len(parts):
                module.__path__ = []
            else:
                module.__dict__.update(attributes)
            sys.modules[package] = module
            added.append(package)
    try:
        spec = importlib.util.spec_from_file_location("released_vllm_mooncake_utils", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name in added:
            del sys.modules[name]
    return module


# ---- the servers, as vLLM starts its own ----


@pytest.fixture(scope="module")
def utils() -> types.ModuleType:
    return load_utils()


@contextlib.contextmanager
def vllm_server(utils: types.ModuleType) -> Iterator[str]:
    """vLLM's ``MooncakeBootstrapServer`` (FastAPI under uvicorn, in a thread): its ``host:port``."""
    server = utils.MooncakeBootstrapServer(HOST, 0)
    server.start()
    try:
        yield f"{HOST}:{server.port}"
    finally:
        server.shutdown()


@contextlib.contextmanager
def aiobootstrap_server(utils: types.ModuleType) -> Iterator[str]:
    """aiobootstrap's drop-in, ``VllmBootstrapServer(host, port)``: its ``host:port``."""
    from aiobootstrap import VllmBootstrapServer

    server = VllmBootstrapServer(HOST, 0)
    server.start()
    try:
        yield f"{HOST}:{server.port}"
    finally:
        server.shutdown()


SERVERS = {"vllm": vllm_server, "aiobootstrap": aiobootstrap_server}


@contextlib.contextmanager
def both(utils: types.ModuleType) -> Iterator[dict[str, str]]:
    with vllm_server(utils) as theirs, aiobootstrap_server(utils) as ours:
        yield {"vllm": theirs, "aiobootstrap": ours}


class SideChannels:
    """Workers' ZMQ ROUTER sockets, each bound to a random port as vLLM's worker binds its own."""

    def __init__(self) -> None:
        self.context = zmq.Context()
        self.sockets: dict[str, zmq.Socket[bytes]] = {}

    def open(self) -> tuple[str, int]:
        """A new side channel: its ``tcp://`` address and its port."""
        socket = self.context.socket(zmq.ROUTER)
        socket.setsockopt(zmq.LINGER, 0)
        port = socket.bind_to_random_port(f"tcp://{HOST}")
        addr = f"tcp://{HOST}:{port}"
        self.sockets[addr] = socket
        return addr, port

    def close(self, addr: str) -> None:
        """The worker is gone: its socket closed, its port refusing."""
        self.sockets.pop(addr).close()

    def close_all(self) -> None:
        for addr in list(self.sockets):
            self.close(addr)
        self.context.term()


@pytest.fixture
def channels() -> Iterator[SideChannels]:
    opened = SideChannels()
    yield opened
    opened.close_all()


# ---- 1. the server module's imports ----


def test_vllms_server_module_needs_two_names_of_vllm_and_no_torch() -> None:
    """In a fresh interpreter, ``mooncake_utils`` imports with the two names given and serves; no other vLLM
    module and no torch was imported (vLLM's own ``kv_connector.utils`` imports torch and vLLM's config)."""
    child = textwrap.dedent(
        f"""
        import json, logging, sys, types, importlib.util
        for name, value in (("vllm.distributed.kv_transfer.kv_connector.utils", ("EngineId", str)),
                            ("vllm.logger", ("init_logger", logging.getLogger))):
            parts = name.split(".")
            for depth in range(1, len(parts)):
                module = sys.modules.setdefault(".".join(parts[:depth]), types.ModuleType(".".join(parts[:depth])))
                module.__path__ = []
            stub = types.ModuleType(name)
            setattr(stub, *value)
            sys.modules[name] = stub
        spec = importlib.util.spec_from_file_location("utils", {str(vllm_file(UTILS))!r})
        utils = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(utils)
        server = utils.MooncakeBootstrapServer("{HOST}", 0)
        server.start()
        import urllib.request
        body = urllib.request.urlopen(f"http://{HOST}:{{server.port}}/query").read()
        server.shutdown()
        vllm = sorted(name for name in sys.modules if name.split(".")[0] == "vllm")
        print(json.dumps({{"query": body.decode(), "vllm": vllm, "torch": "torch" in sys.modules}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    parents = {".".join(name.split(".")[:depth]) for name in STUBS for depth in range(1, name.count(".") + 2)}
    assert seen == {"query": "{}", "vllm": sorted(parents), "torch": False}


# ---- 2. the wire, side by side ----


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any

    @classmethod
    def of(cls, reply: httpx.Response) -> Answer:
        return cls(reply.status_code, reply.json())


def send(hostport: str, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Answer:
    with httpx.Client(base_url=f"http://{hostport}", timeout=30) as http:
        if raw is not None:
            reply = http.request(method, path, content=raw, headers={"Content-Type": "application/json"})
        else:
            reply = http.request(method, path, json=body)
    return Answer.of(reply)


def worker(engine: str, dp: int, tp: int, addr: str, pp: int = 0) -> dict[str, Any]:
    """``/register``'s body as ``register_worker_with_bootstrap`` sends it (``RegisterWorkerPayload``'s order)."""
    return {"engine_id": engine, "dp_rank": dp, "tp_rank": tp, "pp_rank": pp, "addr": addr}


OK = Answer(200, {"status": "ok"})


def test_the_wire_where_vllm_reads_it(utils: types.ModuleType, channels: SideChannels) -> None:
    """One sequence of requests to both servers; each reply equal, status and JSON (and ``/query``'s bytes),
    but where SPEC section 15 differs on purpose (named, with both answers)."""
    a0, _ = channels.open()
    a1, _ = channels.open()
    b0, _ = channels.open()
    moved, _ = channels.open()
    script: list[tuple[str, str, str, Any]] = [
        ("empty deployment", "GET", "/query", None),
        ("a worker", "POST", "/register", worker("A_dp0", 0, 0, a0)),
        ("the same worker again (a retry)", "POST", "/register", worker("A_dp0", 0, 0, a0)),
        ("a second tp rank", "POST", "/register", worker("A_dp0", 0, 1, a1)),
        ("a pp rank", "POST", "/register", worker("A_dp0", 0, 1, a1, pp=1)),
        ("another dp rank, another engine", "POST", "/register", worker("B_dp1", 1, 0, b0)),
        ("a field vLLM's model ignores", "POST", "/register", {**worker("B_dp1", 1, 1, b0), "zone": "x"}),
        ("the deployment", "GET", "/query", None),
        ("another engine on a live dp rank", "POST", "/register", worker("C_dp0", 0, 0, moved)),
        ("a registered worker at a new address", "POST", "/register", worker("A_dp0", 0, 0, moved)),
        ("a body without addr", "POST", "/register", {"engine_id": "A_dp0", "dp_rank": 0, "tp_rank": 2, "pp_rank": 0}),
        ("a rank that is not a number", "POST", "/register", worker("A_dp0", "zero", 0, a0)),
        ("the deployment after", "GET", "/query", None),
    ]  # fmt: skip
    with both(utils) as servers:
        answers = {name: [send(hostport, *step[1:]) for step in script] for name, hostport in servers.items()}
        raw = {name: httpx.get(f"http://{hostport}/query").content for name, hostport in servers.items()}
    differences = {}
    for index, (label, *_) in enumerate(script):
        theirs, ours = answers["vllm"][index], answers["aiobootstrap"][index]
        if theirs != ours:
            differences[label] = (theirs, ours)
    assert answers["vllm"][0] == Answer(200, {})
    assert answers["vllm"][7] == Answer(
        200,
        {
            "0": {"engine_id": "A_dp0", "worker_addr": {"0": {"0": a0}, "1": {"0": a1, "1": a1}}},
            "1": {"engine_id": "B_dp1", "worker_addr": {"0": {"0": b0}, "1": {"0": b0}}},
        },
    )
    assert answers["vllm"][8] == Answer(
        400, {"detail": "Engine ID mismatch for dp_rank=0: expected A_dp0, got C_dp0"}
    )
    # What differs, on purpose: a restarted worker's new address is taken (vLLM's server refuses it, and the
    # worker dies); a malformed body is one sentence (FastAPI's 422 is a list; vLLM's worker stops on either).
    assert set(differences) == {
        "a registered worker at a new address",
        "a body without addr",
        "a rank that is not a number",
        "the deployment after",
    }
    theirs, ours = differences["a registered worker at a new address"]
    assert theirs == Answer(
        400,
        {
            "detail": f"Worker with dp_rank=0, tp_rank=0, pp_rank=0 is already registered at {a0}, "
            f"but still want to register at {moved}"
        },
    )
    assert ours == OK
    for label in ("a body without addr", "a rank that is not a number"):
        theirs, ours = differences[label]
        assert theirs.status == 422
        assert isinstance(theirs.body["detail"], list)
        assert ours.status == 400
        assert isinstance(ours.body["detail"], str)
    theirs, ours = differences["the deployment after"]
    assert ours == Answer(200, json.loads(json.dumps(theirs.body).replace(a0, moved)))
    # The reply's bytes, compact as FastAPI writes them, but for the moved address.
    assert raw["aiobootstrap"] == raw["vllm"].replace(a0.encode(), moved.encode())


# ---- 3. vLLM's released worker registration and decode query ----


@dataclass(frozen=True)
class Registered:
    """A worker registration's conclusion: ``200``, or the HTTP error it stopped on (status, ``detail``)."""

    status: int
    detail: Any = None


class Calls:
    """vLLM's worker registration and decode query, each against a server given by its ``host:port``."""

    source = ""
    register: Callable[..., Awaitable[Registered]]
    query: Callable[[str], Awaitable[tuple[dict[str, Any], dict[str, int]]]]


class Released(Calls):
    """vLLM's own functions from ``mooncake_connector``, on a ``SimpleNamespace`` with what each reads."""

    def __init__(self, connector: types.ModuleType) -> None:
        self.connector = connector
        self.source = f"vLLM's released {connector.__name__}"

    async def register(
        self, hostport: str, engine: str, dp: int, tp: int, port: int, pp: int = 0
    ) -> Registered:
        """``register_worker_with_bootstrap`` as a prefill worker whose config names ``hostport`` as its
        ``bootstrap_server_address`` and whose side channel is ``tcp://HOST:port``."""
        config = types.SimpleNamespace(
            get_from_extra_config=lambda key, default: (
                hostport if key == "bootstrap_server_address" else default
            )
        )
        worker = types.SimpleNamespace(
            vllm_config=types.SimpleNamespace(kv_transfer_config=config),
            hostname=HOST,
            side_channel_port=port,
            engine_id=engine,
            dp_rank=dp,
            tp_rank=tp,
            pp_rank=pp,
        )
        try:
            await self.connector.MooncakeConnectorWorker.register_worker_with_bootstrap(worker)
        except httpx.HTTPStatusError as error:
            return Registered(error.response.status_code, error.response.json()["detail"])
        return Registered(200)

    async def query(self, base: str) -> tuple[dict[str, Any], dict[str, int]]:
        """``_connect_to_prefiller_bootstrap(base)`` as decode runs it for a new prefill address: what it
        learned, ``_remote_agents`` and ``_tp_size``."""
        decode = types.SimpleNamespace(
            _remote_agents={}, _tp_size={}, _pending_bootstrap_queries={base: asyncio.Event()}
        )
        await self.connector.MooncakeConnectorWorker._connect_to_prefiller_bootstrap(decode, base)
        return decode._remote_agents, decode._tp_size


class Equivalents(Calls):
    """Our own equivalents, written from issue 38's description (not vLLM's code): the worker ``POST``s its
    five fields to ``http://host:port/register`` with httpx, retrying only connect errors and timeouts, any
    HTTP error fatal; decode ``GET``s ``base + "/query"``, ``raise_for_status()``, and for every value reads
    ``engine_id`` and ``worker_addr`` (``int()`` of the tp and pp keys), the TP size ``len(worker_addr)``."""

    source = "our equivalents of vLLM's functions, from issue 38's description"

    async def register(
        self, hostport: str, engine: str, dp: int, tp: int, port: int, pp: int = 0
    ) -> Registered:
        body = worker(engine, dp, tp, f"tcp://{HOST}:{port}", pp)
        async with httpx.AsyncClient(timeout=30.0) as http:
            for attempt in range(3):
                try:
                    reply = await http.post(f"http://{hostport}/register", json=body)
                    break
                except (httpx.ConnectError, httpx.TimeoutException):
                    if attempt == 2:
                        raise
                    await asyncio.sleep(1.0)
        try:
            reply.raise_for_status()
        except httpx.HTTPStatusError as error:
            return Registered(error.response.status_code, error.response.json()["detail"])
        return Registered(200)

    async def query(self, base: str) -> tuple[dict[str, Any], dict[str, int]]:
        agents: dict[str, Any] = {}
        sizes: dict[str, int] = {}
        with contextlib.suppress(Exception):  # decode logs the failure and learns nothing
            async with httpx.AsyncClient(timeout=30.0) as http:
                reply = await http.get(base + "/query")
                reply.raise_for_status()
                for entry in reply.json().values():
                    engine = entry["engine_id"]
                    agents[engine] = {
                        int(tp): {int(pp): addr for pp, addr in pps.items()}
                        for tp, pps in entry["worker_addr"].items()
                    }
                    sizes[engine] = len(entry["worker_addr"])
        return agents, sizes


@pytest.fixture(scope="module", params=["released", "equivalents"])
def calls(request: pytest.FixtureRequest, utils: types.ModuleType) -> Calls:
    """vLLM's released functions (skipped, with the reason, where ``mooncake_connector`` does not import
    here), and our equivalents of them, each driven through every check below."""
    if request.param == "equivalents":
        return Equivalents()
    try:
        connector = importlib.import_module(CONNECTOR)
    except ImportError as error:
        pytest.skip(f"vLLM's {CONNECTOR} does not import here ({type(error).__name__}: {error})")
    return Released(connector)


async def test_a_deployment_registers_and_decode_reads_it_alike(
    utils: types.ModuleType, calls: Calls, channels: SideChannels
) -> None:
    """The released worker registers each tp rank on both servers; decode's released query learns the same
    engines, addresses and TP size from each, partial (TP 1, vLLM's readiness gap) and then whole; the
    same worker again is registered on both; another engine on a live dp rank is refused alike."""
    ports = [channels.open()[1] for _ in range(3)]
    with both(utils) as servers:
        learned: dict[str, list[Any]] = {}
        for name, hostport in servers.items():
            steps: list[Any] = [await calls.register(hostport, "A_dp0", 0, 0, ports[0])]
            steps.append(await calls.query(f"http://{hostport}"))
            steps.append(await calls.register(hostport, "A_dp0", 0, 0, ports[0]))
            steps.append(await calls.register(hostport, "A_dp0", 0, 1, ports[1]))
            steps.append(await calls.register(hostport, "B_dp1", 1, 0, ports[2]))
            steps.append(await calls.query(f"http://{hostport}"))
            steps.append(await calls.register(hostport, "C_dp0", 0, 0, ports[2]))
            learned[name] = steps
    assert learned["aiobootstrap"] == learned["vllm"]
    a0, a1, b0 = (f"tcp://{HOST}:{port}" for port in ports)
    assert learned["vllm"] == [
        Registered(200),
        ({"A_dp0": {0: {0: a0}}}, {"A_dp0": 1}),
        Registered(200),
        Registered(200),
        Registered(200),
        ({"A_dp0": {0: {0: a0}, 1: {0: a1}}, "B_dp1": {0: {0: b0}}}, {"A_dp0": 2, "B_dp1": 1}),
        Registered(400, "Engine ID mismatch for dp_rank=0: expected A_dp0, got C_dp0"),
    ]


async def test_a_restarted_worker_and_engine_come_back_only_through_aiobootstrap(
    utils: types.ModuleType, calls: Calls, channels: SideChannels
) -> None:
    """A worker restarted at a new port: vLLM's server refuses it (its worker stops), aiobootstrap takes the
    new address and decode learns it. The engine relaunched under a new ``engine_id`` once the old one's
    workers are gone: vLLM's server still refuses it, aiobootstrap gives it the dp rank."""
    _, old_port = channels.open()
    _, new_port = channels.open()
    with both(utils) as servers:
        seen: dict[str, list[Any]] = {name: [] for name in servers}
        for name, hostport in servers.items():
            seen[name].append(await calls.register(hostport, "A_dp0", 0, 0, old_port))
            seen[name].append(await calls.register(hostport, "A_dp0", 0, 0, new_port))
            seen[name].append((await calls.query(f"http://{hostport}"))[0])
        for addr in list(channels.sockets):  # the whole engine is gone
            channels.close(addr)
        for name, hostport in servers.items():
            seen[name].append(await calls.register(hostport, "D_dp0", 0, 0, 9))
            seen[name].append((await calls.query(f"http://{hostport}"))[0])
    old_addr, new_addr = f"tcp://{HOST}:{old_port}", f"tcp://{HOST}:{new_port}"
    assert seen["vllm"] == [
        Registered(200),
        Registered(
            400,
            f"Worker with dp_rank=0, tp_rank=0, pp_rank=0 is already registered at {old_addr}, "
            f"but still want to register at {new_addr}",
        ),
        {"A_dp0": {0: {0: old_addr}}},
        Registered(400, "Engine ID mismatch for dp_rank=0: expected A_dp0, got D_dp0"),
        {"A_dp0": {0: {0: old_addr}}},
    ]
    assert seen["aiobootstrap"] == [
        Registered(200),
        Registered(200),
        {"A_dp0": {0: {0: new_addr}}},
        Registered(200),
        {"D_dp0": {0: {0: f"tcp://{HOST}:9"}}},
    ]


async def test_decode_behind_a_proxy_learns_the_whole_deployment(
    utils: types.ModuleType, calls: Calls, channels: SideChannels
) -> None:
    """A proxy waits on aiobootstrap (``wait_vllm_workers(tp_size=2)``) while the released workers register,
    then hands decode the prefill address: decode's released query learns the whole TP size, never the
    partial one. A namespace's address (``http://host:port/ns/NAME``, which decode's ``+ "/query"`` keeps)
    reads that deployment alone."""
    from aiobootstrap import BootstrapClient

    ports = [channels.open()[1] for _ in range(2)]
    with aiobootstrap_server(utils) as hostport:
        async with BootstrapClient(f"http://{hostport}") as proxy:
            waiting = asyncio.ensure_future(proxy.wait_vllm_workers(tp_size=2, timeout=30))
            for tp, port in enumerate(ports):
                assert await calls.register(hostport, "E_dp0", 0, tp, port) == Registered(200)
            await asyncio.wait_for(waiting, 30)
        agents, sizes = await calls.query(f"http://{hostport}")
        async with BootstrapClient(f"http://{hostport}", namespace="pd-b") as other:
            await other.register_vllm_worker("F_dp0", 0, 0, 0, f"tcp://{HOST}:{ports[0]}")
        elsewhere = await calls.query(f"http://{hostport}/ns/pd-b")
    assert sizes == {"E_dp0": 2}
    assert agents == {"E_dp0": {tp: {0: f"tcp://{HOST}:{port}"} for tp, port in enumerate(ports)}}
    assert elsewhere == ({"F_dp0": {0: {0: f"tcp://{HOST}:{ports[0]}"}}}, {"F_dp0": 1})


async def test_two_deployments_share_one_aiobootstrap_through_listen(
    calls: Calls, channels: SideChannels
) -> None:
    """vLLM names its bootstrap server by ``host:port`` alone (``bootstrap_server_address``): two deployments,
    each with its own engine on dp rank 0, register through a listener each of one aiobootstrap (``--listen
    PORT=NAMESPACE``), and decode's query of each listener learns its own deployment alone. One vLLM server
    would refuse the second engine (``Engine ID mismatch for dp_rank=0``)."""
    from aiobootstrap import NamespaceListener, VllmBootstrapServer

    ports = {"pd-a": free_port(), "pd-b": free_port()}
    server = VllmBootstrapServer(
        HOST, 0, listen=tuple(NamespaceListener(p, name) for name, p in ports.items())
    )
    server.start()
    try:
        learned = {}
        for name, port in ports.items():
            addr, side = channels.open()
            assert await calls.register(f"{HOST}:{port}", f"{name}_dp0", 0, 0, side) == Registered(200)
            learned[name] = (addr, await calls.query(f"http://{HOST}:{port}"))
    finally:
        server.shutdown()
    for name, (addr, found) in learned.items():
        assert found == ({f"{name}_dp0": {0: {0: addr}}}, {f"{name}_dp0": 1})
