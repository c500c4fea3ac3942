"""EncoderBootstrapServer, constructed and read as the engines do: a shared list, read by reference."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

import aiobootstrap
from aiobootstrap import BadRequest, EncoderBootstrapServer
from aiobootstrap.server.faces.encoders.settings import EncoderSettings
from testbed.redis_server import free_port

from .threads import threads_named, wait_until

DEAD = f"http://127.0.0.1:{free_port()}"
"""Nothing listens there: every probe is refused."""


def send(server: EncoderBootstrapServer, method: str, path: str, body: Any) -> tuple[int, Any]:
    """One request with the standard library, as the engines' encoders send theirs with requests."""
    connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        connection.request(method, path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    return response.status, data.decode()


@pytest.fixture
def shared() -> list[str]:
    return []


@pytest.fixture
def server(shared: list[str]) -> Iterator[EncoderBootstrapServer]:
    # Keywords as the engines pass them; probing off unless a test asks for it.
    server = EncoderBootstrapServer(host="127.0.0.1", port=0, urls=shared, health_check_interval=0)
    try:
        yield server
    finally:
        server.close()


def test_it_is_public_and_a_threaded_server() -> None:
    """aiobootstrap.EncoderBootstrapServer is exported, and is the thread-hosted server with every route."""
    assert "EncoderBootstrapServer" in aiobootstrap.__all__
    assert issubclass(EncoderBootstrapServer, aiobootstrap.ThreadedBootstrapServer)


def test_the_callers_list_follows_http_registrations(
    server: EncoderBootstrapServer, shared: list[str]
) -> None:
    """An encoder's POST and DELETE rewrite the caller's own list in place (the same object, never replaced)."""
    assert send(server, "POST", "/register_encoder_url", {"url": "http://10.0.0.9:8000/"}) == (200, "OK")
    wait_until(lambda: shared == ["http://10.0.0.9:8000"])
    assert server.urls is shared
    assert send(server, "POST", "/register_encoder_url", {"url": "http://10.0.0.10:8000"}) == (200, "OK")
    wait_until(lambda: shared == ["http://10.0.0.9:8000", "http://10.0.0.10:8000"])
    assert send(server, "DELETE", "/unregister_encoder_url", {"url": "http://10.0.0.9:8000"}) == (200, "OK")
    wait_until(lambda: shared == ["http://10.0.0.10:8000"])
    assert server.parked == 0


def test_the_callers_list_is_changed_once_the_200_is_out(
    server: EncoderBootstrapServer, shared: list[str]
) -> None:
    """As with the engines' own server, a reader in this process sees each HTTP change the moment its 200
    arrives, not a loop turn later (25 of 60 such reads missed the change before)."""
    for each in range(30):
        url = f"http://10.0.1.{each}:8000"
        assert send(server, "POST", "/register_encoder_url", {"url": url}) == (200, "OK")
        assert shared[-1:] == [url], each
        assert send(server, "DELETE", "/unregister_encoder_url", {"url": url}) == (200, "OK")
        assert shared == [], each


def test_register_unregister_and_list_in_process(server: EncoderBootstrapServer, shared: list[str]) -> None:
    """register/unregister say whether the list changed, and the list is current when they return."""
    assert server.register("http://a:1/") is True
    assert shared == ["http://a:1"]
    assert server.register("http://a:1") is False
    assert server.register("http://b:1") is True
    copy = server.list_urls()
    assert copy == shared == ["http://a:1", "http://b:1"]
    assert copy is not shared
    assert server.unregister("http://a:1//") is True
    assert server.unregister("http://a:1") is False
    assert shared == ["http://b:1"]
    # Over HTTP too: what the in-process calls did is what a remote reader gets.
    connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
    connection.request("GET", "/list_encoder_urls")
    assert json.loads(connection.getresponse().read())["encoder_urls"] == ["http://b:1"]
    connection.close()
    with pytest.raises(ValueError, match="non-empty"):
        server.register("/")


def test_urls_given_at_construction_are_registered() -> None:
    """A list that holds URLs when given keeps them (less a trailing /), listed and served."""
    shared = ["http://x:1/", "http://y:1"]
    with EncoderBootstrapServer("127.0.0.1", 0, urls=shared, health_check_interval=0) as server:
        assert shared == ["http://x:1", "http://y:1"]
        assert server.urls is shared
        assert server.list_urls() == shared


def test_no_list_given_is_a_list_of_its_own() -> None:
    """Without urls= the server keeps a list of its own, read through .urls and list_urls()."""
    with EncoderBootstrapServer("127.0.0.1", 0, health_check_interval=0) as server:
        assert server.urls == []
        server.register("http://z:1")
        assert server.urls == server.list_urls() == ["http://z:1"]


def test_a_dead_encoder_leaves_the_callers_list() -> None:
    """The health-check arguments: a dead URL is evicted from the caller's list, and a register puts it back."""
    shared: list[str] = []
    with EncoderBootstrapServer(
        "127.0.0.1", 0, urls=shared, health_check_interval=0.05, health_check_timeout=0.5, evicted_ttl=60
    ) as server:
        assert server.register(DEAD) is True
        wait_until(lambda: shared == [])
        assert server.unregister(DEAD) is True  # evicted counts as there
        assert server.register(DEAD) is True
        assert shared == [DEAD]


def test_close_stops_the_thread_and_keeps_the_list(shared: list[str]) -> None:
    """After close the thread is gone; the caller's list keeps its last state, and list_urls still reads it."""
    server = EncoderBootstrapServer("127.0.0.1", 0, urls=shared, health_check_interval=0)
    server.register("http://a:1")
    server.close()
    assert not [thread for thread in threads_named("aiobootstrap server") if thread.is_alive()]
    assert shared == server.list_urls() == ["http://a:1"]


def test_the_list_follows_even_when_every_wait_slot_is_taken() -> None:
    """With no wait slot free (max_waiters=0) the caller's list still follows HTTP registrations."""
    shared: list[str] = []
    with EncoderBootstrapServer(
        "127.0.0.1", 0, urls=shared, health_check_interval=0, max_waiters=0
    ) as server:
        assert send(server, "POST", "/register_encoder_url", {"url": "http://full:1"}) == (200, "OK")
        wait_until(lambda: shared == ["http://full:1"])
        assert server.parked == 0


def test_the_engines_variables_are_its_defaults_and_arguments_win(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the engines' class does: SGLANG_ENCODER_BOOTSTRAP_* set the probes, an argument overrides one."""
    monkeypatch.setenv("SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_INTERVAL", "0")
    monkeypatch.setenv("SGLANG_ENCODER_BOOTSTRAP_EVICTED_TTL", "30")
    with EncoderBootstrapServer("127.0.0.1", 0, health_check_timeout=0.5, evicted_ttl=5.0) as server:
        config = server._server.config.settings_of(EncoderSettings)
    assert (config.encoder_health_interval, config.encoder_health_timeout, config.encoder_evicted_ttl) == (
        0.0,
        0.5,
        5.0,
    )


def test_a_variable_that_is_not_a_number_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad engines' variable is one clear ValueError naming it, before any thread starts."""
    monkeypatch.setenv("SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_TIMEOUT"):
        EncoderBootstrapServer("127.0.0.1", 0)


def test_a_namespaces_list_is_kept_in_place_for_its_deployment() -> None:
    """``namespace=``: ``urls`` is that deployment's list (the engine plugin's AIOBOOTSTRAP_NAMESPACE); the
    default namespace's registrations, on the same server, are not in it."""
    urls: list[str] = []
    server = EncoderBootstrapServer(
        host="127.0.0.1", port=0, urls=urls, health_check_interval=0, namespace="pd-7"
    )
    try:
        assert send(server, "POST", "/ns/pd-7/register_encoder_url", {"url": "http://10.0.0.9:8000"}) == (
            200,
            "OK",
        )
        assert send(server, "POST", "/register_encoder_url", {"url": "http://10.0.0.10:8000"}) == (200, "OK")
        wait_until(lambda: urls == ["http://10.0.0.9:8000"])
        assert server.register("http://10.0.0.11:8000") is True
        assert urls == ["http://10.0.0.9:8000", "http://10.0.0.11:8000"]
        status, listed = send(server, "GET", "/ns/pd-7/list_encoder_urls", None)
        assert (status, json.loads(listed)["encoder_urls"]) == (200, urls)
    finally:
        server.close()
    with pytest.raises(BadRequest, match="namespace"):
        EncoderBootstrapServer(host="127.0.0.1", port=0, namespace="pd 7")
