"""SyncBootstrapClient from plain threads, against a real server in a thread of the test process."""

from __future__ import annotations

import inspect
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from aiobootstrap import (
    Backoff,
    BadRequest,
    BootstrapClient,
    RankNotRegistered,
    ServerUnavailable,
    SyncBootstrapClient,
    ThreadedBootstrapServer,
    TransferEngineInfo,
)

from .helpers.waits import GUARD
from .threads import threads_named, wait_until


def client_threads() -> list[threading.Thread]:
    return threads_named("aiobootstrap client")


@pytest.fixture
def server() -> Iterator[ThreadedBootstrapServer]:
    with ThreadedBootstrapServer(port=0, world_size=64) as server:
        yield server


@pytest.fixture
def client(server: ThreadedBootstrapServer) -> Iterator[SyncBootstrapClient]:
    with SyncBootstrapClient(server.url) as client:
        yield client


def test_register_then_get(client: SyncBootstrapClient) -> None:
    """register, get, get_many and list_ranks block and return what the async client returns."""
    assert client.health() is True
    client.register(3, session_id="10.0.0.7:18000", weights_info_dict={"w": [1, 2]})
    client.register(4, session_id="10.0.0.8:18000", weights_info_dict={})
    info = client.get(3, timeout=GUARD)
    assert info == TransferEngineInfo(3, "10.0.0.7:18000", {"w": [1, 2]}, info.version)
    assert set(client.get_many(iter([3, 4]), timeout=GUARD)) == {3, 4}
    listing = client.list_ranks()
    assert [summary.rank for summary in listing.ranks] == [3, 4]
    assert listing.missing is not None
    assert 0 in listing.missing


def test_errors_are_the_async_clients(client: SyncBootstrapClient) -> None:
    """A timeout raises RankNotRegistered (a TimeoutError); a bad rank raises BadRequest at once."""
    with pytest.raises(RankNotRegistered) as caught:
        client.get(5, timeout=0)
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.rank == 5
    with pytest.raises(RankNotRegistered) as many:
        client.get_many([5, 6], timeout=0)
    assert list(many.value.ranks) == [5, 6]
    with pytest.raises(BadRequest, match="world size 64"):
        client.get(100, timeout=GUARD)


def test_unreachable_server() -> None:
    """health() says False and register() gives up with ServerUnavailable when nobody listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with SyncBootstrapClient(f"http://127.0.0.1:{port}", backoff=Backoff(0.001, 0.01)) as client:
        assert client.health() is False
        with pytest.raises(ServerUnavailable):
            client.register(0, session_id="s", weights_info_dict={}, timeout=0.05)


def test_many_threads_share_one_client_and_are_woken_together(
    server: ThreadedBootstrapServer, client: SyncBootstrapClient
) -> None:
    """Threads waiting on one rank through one shared client all return once another thread registers it."""
    waiters = 32
    with ThreadPoolExecutor(waiters + 1) as pool:
        gets = [pool.submit(client.get, 7, timeout=60.0) for _ in range(waiters)]
        wait_until(lambda: server.parked == waiters)
        with SyncBootstrapClient(server.url) as registrar:
            pool.submit(registrar.register, 7, session_id="10.0.0.9:18000", weights_info_dict={}).result(
                timeout=GUARD
            )
        infos = [get.result(timeout=GUARD) for get in gets]
    assert {info.session_id for info in infos} == {"10.0.0.9:18000"}


def test_refused_inside_a_running_event_loop(client: SyncBootstrapClient) -> None:
    """Called from a coroutine it raises RuntimeError instead of stalling that loop; it still works after."""
    import asyncio

    async def misuse() -> None:
        client.health()

    with pytest.raises(RuntimeError, match="BootstrapClient"):
        asyncio.run(misuse())
    assert client.health() is True


def test_close_stops_the_thread_and_ends_waiting_calls(server: ThreadedBootstrapServer) -> None:
    """close() answers calls still waiting with RuntimeError, joins the thread; later calls are refused."""
    client = SyncBootstrapClient(server.url)
    assert len(client_threads()) == 1
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(client.get, 0, timeout=60.0)
        wait_until(lambda: server.parked == 1)
        client.close()
        with pytest.raises(RuntimeError, match="closed"):
            waiting.result(timeout=GUARD)
    assert client_threads() == []
    wait_until(lambda: server.parked == 0)
    with pytest.raises(RuntimeError, match="closed"):
        client.health()
    client.close()


def test_interrupted_caller_leaves_the_client_usable(
    server: ThreadedBootstrapServer, client: SyncBootstrapClient
) -> None:
    """Ctrl-C during a blocking get cancels that get (its request hangs up) and the client keeps working."""
    main = threading.main_thread()
    if threading.current_thread() is not main:
        pytest.skip("signals reach only the main thread")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def interrupt_once_parked() -> None:
        wait_until(lambda: server.parked == 1)
        assert main.ident is not None
        signal.pthread_kill(main.ident, signal.SIGINT)

    interrupter = threading.Thread(target=interrupt_once_parked)
    try:
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            client.get(0, timeout=60.0)
    finally:
        interrupter.join(GUARD)
        signal.signal(signal.SIGINT, previous)
    wait_until(lambda: server.parked == 0)
    client.register(0, session_id="s", weights_info_dict={})
    assert client.get(0, timeout=GUARD).session_id == "s"


def test_close_from_two_threads_returns_in_both_once_stopped(server: ThreadedBootstrapServer) -> None:
    """Whichever thread closes second also returns only once the client's thread has stopped."""
    client = SyncBootstrapClient(server.url)
    client.health()
    with ThreadPoolExecutor(2) as pool:
        closes = [pool.submit(client.close) for _ in range(2)]
        for close in closes:
            close.result(timeout=GUARD)
            assert client_threads() == []


def test_namespace_isolates_like_the_async_client(
    server: ThreadedBootstrapServer, client: SyncBootstrapClient
) -> None:
    """namespace= reaches the wire: a rank registered in one namespace is absent from the default one."""
    with SyncBootstrapClient(server.url, namespace="blue") as blue:
        assert blue.namespace == "blue"
        blue.register(1, session_id="blue:1", weights_info_dict={})
        assert blue.get(1, timeout=GUARD).session_id == "blue:1"
    with pytest.raises(RankNotRegistered):
        client.get(1, timeout=0)
    assert server.get_transfer_engine_info(1) is None


def test_unregister_says_whether_there_was_info() -> None:
    """unregister removes a rank (True), then finds nothing to remove (False), as the async client does."""
    with ThreadedBootstrapServer(port=0) as server, SyncBootstrapClient(server.url) as client:
        client.register(3, session_id="s3", weights_info_dict={})
        assert client.unregister(3) is True
        assert server.get_transfer_engine_info(3) is None
        assert client.unregister(3) is False


def test_reregister_refills_a_restarted_server() -> None:
    """With reregister=True, a server restarted empty on the same port gets the client's ranks back."""
    first = ThreadedBootstrapServer(port=0)
    port = first.port
    with SyncBootstrapClient(first.url, reregister=True) as client:
        client.register(3, session_id="s3", weights_info_dict={"w": 1})
        assert client.health() is True
        first.close()
        with ThreadedBootstrapServer(port=port) as second:
            assert client.get(3, timeout=GUARD).session_id == "s3"
            assert second.get_transfer_engine_info(3) == ("s3", {"w": 1})


def test_every_async_method_blocks_with_the_same_signature() -> None:
    """Each public coroutine method of BootstrapClient is on SyncBootstrapClient, with its signature and doc."""
    public = {
        name
        for name, member in inspect.getmembers(BootstrapClient, inspect.iscoroutinefunction)
        if not name.startswith("_") and name != "close"
    }
    assert public == {
        "health",
        "register",
        "unregister",
        "get",
        "get_many",
        "register_parallelism_config",
        "unregister_parallelism_config",
        "get_parallelism_config",
        "get_parallelism_configs",
        "register_encoder_url",
        "unregister_encoder_url",
        "list_encoder_urls",
        "wait_encoder_urls",
        "list_ranks",
        "list_namespaces",
        "encoder_url_health",
        "register_prefill_rank",
        "prefill_parallel_info",
        "prefill_rank_address",
        "register_dp_rank",
        "query_dp_ranks",
        "prefill_status",
        "get_metadata",
        "wait_metadata",
        "put_metadata",
        "delete_metadata",
        "mooncake_engines",
        "register_vllm_worker",
        "query_vllm_workers",
        "wait_vllm_workers",
        "vllm_status",
    }
    for name in public:
        method = getattr(SyncBootstrapClient, name)
        original = getattr(BootstrapClient, name)
        assert inspect.signature(method) == inspect.signature(original), name
        assert method.__doc__ == original.__doc__


def test_the_watch_takes_the_async_watchs_parameters() -> None:
    """watch_encoder_urls, the one method written out, takes what the async iterator takes."""
    sync = inspect.signature(SyncBootstrapClient.watch_encoder_urls).parameters
    async_ = inspect.signature(BootstrapClient.watch_encoder_urls).parameters
    assert list(sync.values()) == list(async_.values())


def test_the_constructor_takes_the_async_clients_arguments() -> None:
    """SyncBootstrapClient(...) takes BootstrapClient's arguments, but for the loop-bound session and connector."""
    sync = inspect.signature(SyncBootstrapClient).parameters
    async_ = inspect.signature(BootstrapClient).parameters
    assert list(sync.values()) == [p for name, p in async_.items() if name not in ("session", "connector")]


def test_a_list_of_urls_fails_over_like_the_async_client(server: ThreadedBootstrapServer) -> None:
    """Given a dead URL and a live one, the blocking client moves to the live one."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with SyncBootstrapClient([dead, server.url]) as client:
        client.register(1, session_id="s1", weights_info_dict={})
        assert client.url == server.url
        assert client.urls == (dead, server.url)
        assert client.get(1, timeout=GUARD).session_id == "s1"


# -- the engine-info family, blocking --------------------------------------


def test_roles_and_tagged_info_through_the_blocking_client(client: SyncBootstrapClient) -> None:
    """role= keeps draft and target apart, and NIXL info comes back whole, as from the async client."""
    nixl = {"backend": "nixl", "agent_name": "a0", "agent_metadata": "bWV0YQ=="}
    client.register(0, weights_info_dict={}, fields=nixl, role="draft")
    client.register(0, session_id="target", weights_info_dict={})
    draft = client.get(0, timeout=0, role="draft")
    assert (draft.fields, draft.role) == ({**nixl, "weights_info_dict": {}}, "draft")
    assert client.get_many([0], timeout=0)[0].session_id == "target"
    assert client.unregister(0, role="draft")
    with pytest.raises(RankNotRegistered):
        client.get(0, timeout=0, role="draft")


def test_parallelism_configs_through_the_blocking_client(
    server: ThreadedBootstrapServer, client: SyncBootstrapClient
) -> None:
    """register, get (woken from another thread), batch get and removal of parallelism configs."""
    client.register_parallelism_config(1, {"tp_size": 8})
    assert server.get_parallelism_config_info(1) == {"tp_size": 8}
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(client.get_parallelism_config, 2, timeout=60.0, role="draft")
        wait_until(lambda: server.parked == 1)
        client.register_parallelism_config(2, {"tp_size": 1}, role="draft")
        assert waiting.result(timeout=GUARD).config == {"tp_size": 1}
    assert set(client.get_parallelism_configs([1], timeout=0)) == {1}
    with pytest.raises(RankNotRegistered, match="No parallelism config for rank 2"):
        client.get_parallelism_config(2, timeout=0)
    assert client.unregister_parallelism_config(1)
    assert server.get_parallelism_config_info(1) is None


def test_encoder_urls_through_the_blocking_client(
    server: ThreadedBootstrapServer, client: SyncBootstrapClient
) -> None:
    """register, list, a wait woken from another thread, and the blocking watch."""
    client.register_encoder_url("http://a")
    assert client.list_encoder_urls() == ["http://a"] == server.get_encoder_urls()
    now = client.wait_encoder_urls(timeout=0)
    watch = client.watch_encoder_urls(after=now.version)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(next, watch)
        wait_until(lambda: server.parked == 1)
        client.unregister_encoder_url("http://a")
        changed = waiting.result(timeout=GUARD)
    assert (changed.urls, changed.version) == ([], now.version + 1)
    assert client.wait_encoder_urls(changed.version, timeout=0) == changed


def test_a_one_shot_client_never_closed_leaves_no_unclosed_session(server: ThreadedBootstrapServer) -> None:
    """``SyncBootstrapClient(url).register(...)`` with no close(): the client closes when collected (and at exit),
    so the process ends with no aiohttp "Unclosed client session" warning and its thread gone."""
    script = (
        "import gc, sys, threading\n"
        "from aiobootstrap import SyncBootstrapClient\n"
        f"SyncBootstrapClient({server.url!r}).register(0, session_id='10.0.0.7:18000', weights_info_dict={{}})\n"
        "gc.collect()\n"
        "print(sorted(t.name for t in threading.enumerate() if t.name.startswith('aiobootstrap client')))\n"
        f"SyncBootstrapClient({server.url!r}).health()\n"  # this one is left to the exit
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert "Unclosed" not in done.stderr, done.stderr
