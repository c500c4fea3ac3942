"""ThreadedBootstrapServer, driven from plain threads the way engines drive their bootstrap server."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from aiobootstrap import AddressInUse, ThreadedBootstrapServer

from .helpers.waits import GUARD
from .threads import threads_named, wait_until


def server_threads() -> list[threading.Thread]:
    return threads_named("aiobootstrap server")


def request(server: ThreadedBootstrapServer, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request with the standard library, as an engine's `requests` call would send it."""
    connection = http.client.HTTPConnection(server.host, server.port, timeout=GUARD + 60)
    try:
        payload = None if body is None else json.dumps(body)
        connection.request(method, path, body=payload, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    try:
        return response.status, json.loads(data)
    except ValueError:
        return response.status, data.decode()


def register(server: ThreadedBootstrapServer, rank: int, session_id: str, weights: dict[str, Any]) -> None:
    status, _ = request(
        server,
        "PUT",
        "/register_transfer_engine_info",
        {"rank": rank, "transfer_engine_info": {"session_id": session_id, "weights_info_dict": weights}},
    )
    assert status == 200


@pytest.fixture
def server() -> Iterator[ThreadedBootstrapServer]:
    with ThreadedBootstrapServer(port=0) as server:
        yield server


def test_listening_when_the_constructor_returns(server: ThreadedBootstrapServer) -> None:
    """The constructor returns only once the server answers, with the real port in .port and .url."""
    assert server.port != 0
    assert server.url == f"http://127.0.0.1:{server.port}"
    assert request(server, "GET", "/health") == (200, "OK")


def test_close_stops_listening_and_joins_its_thread() -> None:
    """close() stops the server, joins its daemon thread, and may be called again."""
    server = ThreadedBootstrapServer(port=0)
    assert [thread.daemon for thread in server_threads()] == [True]
    server.close()
    server.close()
    assert server_threads() == []
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=GUARD).close()


def test_bind_failure_is_raised_in_the_callers_thread() -> None:
    """A taken port raises AddressInUse from the constructor, and leaves no thread behind."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(AddressInUse) as caught:
            ThreadedBootstrapServer(port=port)
    assert caught.value.port == port
    assert f"127.0.0.1:{port}" in caught.value.detail
    # An embedder has no --port to pick another with.
    assert "--port" not in caught.value.detail
    assert caught.value.detail.endswith("; pick another port.")
    assert server_threads() == []


def test_bad_options_are_refused_before_any_thread_starts() -> None:
    """Options are ServerConfig fields, validated in the caller's thread."""
    with pytest.raises(ValueError, match="world size"):
        ThreadedBootstrapServer(port=0, world_size=0)
    with pytest.raises(TypeError):
        ThreadedBootstrapServer(port=0, no_such_option=1)
    assert server_threads() == []


def test_options_reach_the_server() -> None:
    """world_size= given to the constructor makes the server refuse ranks outside it."""
    with ThreadedBootstrapServer(port=0, world_size=2) as server:
        status, body = request(server, "GET", "/get_transfer_engine_info?rank=5")
    assert status == 400
    assert "world size 2" in body["detail"]


def test_get_transfer_engine_info_has_the_shape_engines_read(server: ThreadedBootstrapServer) -> None:
    """None until the rank registers, then (session_id, weights_info_dict); old tp_rank bodies count."""
    assert server.get_transfer_engine_info(1) is None
    request(
        server,
        "PUT",
        "/register_transfer_engine_info",
        {"tp_rank": 1, "transfer_engine_info": {"session_id": "10.0.0.7:18000", "weights_info_dict": {}}},
    )
    register(server, 0, "10.0.0.6:18000", {"layer.0": [140000, 4096]})
    assert server.get_transfer_engine_info(0) == ("10.0.0.6:18000", {"layer.0": [140000, 4096]})
    assert server.get_transfer_engine_info(1) == ("10.0.0.7:18000", {})
    register(server, 0, "10.0.0.6:18001", {})
    assert server.get_transfer_engine_info(0) == ("10.0.0.6:18001", {})


def test_get_transfer_engine_info_hands_out_a_copy(server: ThreadedBootstrapServer) -> None:
    """Changing the returned dict changes nothing the server serves."""
    register(server, 0, "s", {"a": 1})
    info = server.get_transfer_engine_info(0)
    assert info is not None
    info[1]["a"] = 2
    assert server.get_transfer_engine_info(0) == ("s", {"a": 1})
    assert request(server, "GET", "/get_transfer_engine_info?rank=0")[1][
        "remote_instance_transfer_engine_info"
    ] == ["s", {"a": 1}]


def test_get_transfer_engine_info_still_reads_after_close(server: ThreadedBootstrapServer) -> None:
    """A closed server still answers in-process reads with what was registered, as a dict would."""
    register(server, 0, "s", {})
    server.close()
    assert server.get_transfer_engine_info(0) == ("s", {})
    assert server.get_transfer_engine_info(1) is None


def test_transfer_engine_info_is_a_live_read_only_mapping(server: ThreadedBootstrapServer) -> None:
    """.transfer_engine_info reads like the dict engines' own servers expose, and follows registrations."""
    view = server.transfer_engine_info
    assert len(view) == 0
    assert 0 not in view
    register(server, 2, "b", {})
    register(server, 0, "a", {"w": 1})
    assert dict(view) == {0: ("a", {"w": 1}), 2: ("b", {})}
    assert view.get(1) is None
    with pytest.raises(KeyError):
        view[1]


def test_parallelism_config_is_a_live_read_only_mapping(server: ThreadedBootstrapServer) -> None:
    """.parallelism_config, read by engines on their in-process server beside .transfer_engine_info: the target
    role's configs by rank, following registrations (an engine failed at start with AttributeError before)."""
    view = server.parallelism_config
    assert len(view) == 0
    for rank, role in ((1, "target"), (0, "target"), (0, "draft")):
        body = {"rank": rank, "role": role, "parallelism_config": {"tp_size": 2, "rank_of": rank}}
        assert request(server, "PUT", "/register_parallelism_config", body)[0] == 200
    assert dict(view) == {0: {"tp_size": 2, "rank_of": 0}, 1: {"tp_size": 2, "rank_of": 1}}
    view[0]["tp_size"] = 99  # the caller's own copy
    assert view[0]["tp_size"] == 2
    request(server, "DELETE", "/register_parallelism_config?rank=1")
    assert list(view) == [0]
    with pytest.raises(KeyError):
        view[1]


def test_polling_getters_that_add_wait_are_woken(server: ThreadedBootstrapServer) -> None:
    """Many old-style getters, each adding &wait= to its GET, all answer 200 once the rank registers."""
    getters = 8
    with ThreadPoolExecutor(getters) as pool:
        replies = [
            pool.submit(request, server, "GET", "/get_transfer_engine_info?rank=3&wait=60")
            for _ in range(getters)
        ]
        wait_until(lambda: server.parked == getters)
        threading.Thread(target=register, args=(server, 3, "10.0.0.9:18000", {"w": 1})).start()
        results = [reply.result(timeout=GUARD) for reply in replies]
    for status, body in results:
        assert status == 200
        assert body["remote_instance_transfer_engine_info"] == ["10.0.0.9:18000", {"w": 1}]


def test_close_answers_parked_waits_with_503() -> None:
    """close() answers every parked wait at once with 503, then returns."""
    server = ThreadedBootstrapServer(port=0)
    with ThreadPoolExecutor(4) as pool:
        replies = [
            pool.submit(request, server, "GET", "/get_transfer_engine_info?rank=0&wait=60"),
            pool.submit(request, server, "GET", "/get_transfer_engine_info?rank=1&wait=60"),
            pool.submit(request, server, "GET", "/get_transfer_engine_info_batch?ranks=0-7&wait=60"),
        ]
        wait_until(lambda: server.parked == 3)
        server.close()
        results = [reply.result(timeout=GUARD) for reply in replies]
    for status, body in results:
        assert status == 503
        assert "shutting down" in body["detail"]
    assert server_threads() == []


def test_in_process_reads_see_whole_registrations(server: ThreadedBootstrapServer) -> None:
    """Threads reading while another re-registers always see a session id and weights of one registration."""
    rounds = 50
    stop = threading.Event()

    def read() -> int:
        seen = 0
        while True:
            finished = stop.is_set()
            info = server.get_transfer_engine_info(0)
            if info is not None:
                session_id, weights = info
                assert session_id == f"s{weights['n']}"
                assert weights["n"] >= seen
                seen = weights["n"]
            if finished:
                return seen
            time.sleep(0)  # let the writer's thread have the GIL too

    with ThreadPoolExecutor(4) as pool:
        readers = [pool.submit(read) for _ in range(3)]
        try:
            for n in range(rounds):
                register(server, 0, f"s{n}", {"n": n})
        finally:
            stop.set()
        assert [reader.result(timeout=GUARD) for reader in readers] == [rounds - 1] * 3


def test_in_process_reads_of_parallelism_config_and_encoder_urls(server: ThreadedBootstrapServer) -> None:
    """get_parallelism_config_info and get_encoder_urls read in-process, as the engines' servers offer."""
    assert server.get_parallelism_config_info(0) is None
    assert server.get_encoder_urls() == []
    config = {"tp_size": 4, "pp_size": 1}
    status, _ = request(
        server, "PUT", "/register_parallelism_config", {"tp_rank": 0, "parallelism_config": config}
    )
    assert status == 200
    request(
        server, "PUT", "/register_parallelism_config", {"rank": 0, "parallelism_config": {}, "role": "draft"}
    )
    for url in ("http://e1", "http://e2", "http://e1"):
        assert request(server, "POST", "/register_encoder_url", {"url": url})[0] == 200
    got = server.get_parallelism_config_info(0)
    assert got == config
    assert got is not None
    got["tp_size"] = 99  # the caller's own copy
    assert server.get_parallelism_config_info(0) == config
    assert server.get_parallelism_config_info(0, role="draft") == {}
    assert server.get_encoder_urls() == ["http://e1", "http://e2"]
    request(server, "DELETE", "/unregister_encoder_url", {"url": "http://e1"})
    assert server.get_encoder_urls() == ["http://e2"]


def test_in_process_read_of_tagged_info(server: ThreadedBootstrapServer) -> None:
    """A NIXL registration reads whole in-process; the classic read gives its weights and no session."""
    info = {"backend": "nixl", "agent_name": "a0", "agent_metadata": "AAE=", "weights_info_dict": {"w": 1}}
    assert (
        request(server, "PUT", "/register_transfer_engine_info", {"rank": 1, "transfer_engine_info": info})[0]
        == 200
    )
    assert server.get_transfer_engine_info_object(1) == info
    assert server.get_transfer_engine_info(1) == ("", {"w": 1})
