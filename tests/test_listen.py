"""A listener per deployment (SPEC section 17, ``--listen [HOST:]PORT=NAMESPACE``): a port whose unprefixed
routes are one namespace's, for engines that name their server by ``host:port`` alone.

Two deployments with the same ranks and keys, each on its own port, each see only their own records,
through several faces' routes, while the main port's ``/ns/NAME/`` sees the same. A listener refuses
another namespace's routes and ``/metrics``; tokens apply per namespace as on the main port. The CLI
prints a line per listener after the main one, reports a taken port in one line, and refuses a bad
spec in one line; ``status`` and ``/namespaces`` name the listeners.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
import trustme

from aiobootstrap import BootstrapClient, BootstrapServer, ServerConfig
from aiobootstrap.exceptions import AddressInUse
from aiobootstrap.server.bind import bind_each, bind_sockets
from aiobootstrap.server.config import NamespaceListener
from aiobootstrap.server.tokens import TokenSet
from testbed.ports import quiet_port

from .helpers.cli import LISTENING, launch
from .helpers.prefill import ALL, rank_body, route
from .helpers.tools import GUARD, assert_one_line_error, tool
from .helpers.waits import until

ALSO = "namespace {} also listening on "


def _listeners(*names: str) -> tuple[NamespaceListener, ...]:
    return tuple(NamespaceListener(0, name) for name in names)


@pytest.fixture
async def server() -> AsyncIterator[BootstrapServer]:
    async with BootstrapServer(port=0, listen=_listeners("a", "b")) as served:
        yield served


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def _info(session_id: str) -> dict[str, object]:
    return {"rank": 0, "transfer_engine_info": {"session_id": session_id, "weights_info_dict": {}}}


async def _text(http: aiohttp.ClientSession, method: str, url: str, **kwargs: object) -> tuple[int, str]:
    async with http.request(method, url, **kwargs) as reply:  # type: ignore[arg-type]
        return reply.status, await reply.text()


async def test_two_deployments_with_the_same_keys_each_see_their_own_on_their_port(
    server: BootstrapServer, http: aiohttp.ClientSession
) -> None:
    """Rank 0's engine info, a Mooncake key and a prefill rank, the same in two deployments, each
    registered on its own listener: each port reads its own, the main port's /ns/NAME/ the same, and the
    default namespace holds none of them."""
    urls = dict(server.listeners)
    for name, url in urls.items():
        assert await _text(http, "PUT", f"{url}/register_transfer_engine_info", json=_info(f"{name}:1")) == (
            200,
            "OK",
        )
        assert (await _text(http, "PUT", f"{url}/metadata?key=mooncake/ram/x", data=f'{{"s": "{name}"}}'))[
            0
        ] == 200
        body = rank_body(tp_size=1, dp_size=1, rank_ip=f"10.0.0.{ord(name)}")
        assert await _text(http, "PUT", f"{url}/route", json=body) == (200, "OK")
    for name, url in urls.items():
        for base in (url, f"{server.url}/ns/{name}", f"{url}/ns/{name}"):
            status, text = await _text(http, "GET", f"{base}/get_transfer_engine_info?rank=0")
            assert (status, f'["{name}:1"' in text) == (200, True), text
            assert await _text(http, "GET", f"{base}/metadata?key=mooncake/ram/x") == (
                200,
                f'{{"s": "{name}"}}',
            )
            status, text = await _text(http, "GET", f"{base}/route?{route(0, 0, 0, 0)}")
            assert (status, f'"10.0.0.{ord(name)}"' in text) == (200, True), text
            assert (await _text(http, "GET", f"{base}/route?{ALL}"))[0] == 200
    status, text = await _text(http, "GET", f"{server.url}/get_transfer_engine_info?rank=0")
    assert status == 404
    assert '"missing"' in text
    assert (await _text(http, "GET", f"{server.url}/metadata?key=mooncake/ram/x"))[0] == 404


async def test_a_listener_refuses_another_namespace_and_the_metrics_naming_its_own(
    server: BootstrapServer, http: aiohttp.ClientSession
) -> None:
    """On a's port, /ns/b/... and /metrics are a 404 whose detail names namespace a, with nothing stored;
    /ready, /openapi.json and a's own /ns/a/... are served."""
    a = dict(server.listeners)["a"]
    status, text = await _text(http, "PUT", f"{a}/ns/b/register_transfer_engine_info", json=_info("x:1"))
    assert status == 404
    assert "serves namespace a alone" in text
    assert (await _text(http, "GET", f"{server.url}/ns/b/get_transfer_engine_info?rank=0"))[0] == 404
    status, text = await _text(http, "GET", f"{a}/metrics")
    assert status == 404
    assert "namespace a" in text
    assert "/metrics" in text
    assert await _text(http, "GET", f"{a}/ready") == (200, "OK")
    assert (await _text(http, "GET", f"{a}/openapi.json"))[0] == 200
    assert (await _text(http, "PUT", f"{a}/ns/a/register_transfer_engine_info", json=_info("a:1")))[0] == 200
    assert (await _text(http, "GET", f"{server.url}/metrics"))[0] == 200


async def test_a_listeners_replies_carry_the_boot_and_its_redirects_the_path_asked(
    server: BootstrapServer, http: aiohttp.ClientSession
) -> None:
    """A reply on a listener names the store's boot as every reply does, and a trailing slash's 307 points
    at the path the client asked, without the /ns/a it never sent."""
    a = dict(server.listeners)["a"]
    async with http.get(f"{a}/get_transfer_engine_info/?rank=0", allow_redirects=False) as reply:
        assert reply.status == 307
        assert reply.headers["Location"] == "/get_transfer_engine_info?rank=0"
    async with http.get(f"{a}/get_transfer_engine_info?rank=0") as reply:
        assert reply.status == 404
        assert reply.headers["X-Aiobootstrap-Boot"] == server.registry.incarnation


async def test_namespaces_names_the_listeners_and_a_listener_its_own_namespace(
    server: BootstrapServer, http: aiohttp.ClientSession
) -> None:
    """The main port's /namespaces lists every namespace and every listener; a listener's, its own alone,
    with the namespace it serves."""
    urls = dict(server.listeners)
    for url in urls.values():
        assert (await _text(http, "PUT", f"{url}/register_transfer_engine_info", json=_info("x:1")))[0] == 200
    async with http.get(f"{server.url}/namespaces") as reply:
        listing = await reply.json()
    assert [each["namespace"] for each in listing["namespaces"]] == ["a", "b"]
    assert listing["listeners"] == [{"namespace": name, "url": url} for name, url in urls.items()]
    assert "listener" not in listing
    async with http.get(f"{urls['b']}/namespaces") as reply:
        listing = await reply.json()
    assert [each["namespace"] for each in listing["namespaces"]] == ["b"]
    assert listing["listeners"] == [{"namespace": "b", "url": urls["b"]}]
    assert listing["listener"] == "b"


async def test_a_server_without_listeners_says_nothing_of_them(http: aiohttp.ClientSession) -> None:
    """No --listen: /namespaces is as it was, and the server has no listeners."""
    async with BootstrapServer(port=0) as server, http.get(f"{server.url}/namespaces") as reply:
        assert set(await reply.json()) == {"waits", "namespaces"}
        assert server.listeners == ()


async def test_tokens_scoped_to_a_namespace_work_on_its_listener(http: aiohttp.ClientSession) -> None:
    """A token of namespace a writes on a's port; b's token is refused there naming namespace a, and no token
    is a 401, as on the main port's /ns/a/."""
    tokens = TokenSet.parse("tok-a ns=a\ntok-b ns=b\n")
    config = ServerConfig(port=0, auth_tokens=tokens, listen=_listeners("a"))
    async with BootstrapServer(config) as server:
        a = dict(server.listeners)["a"]
        register = f"{a}/register_transfer_engine_info"

        def bearer(token: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {token}"}

        assert (await _text(http, "PUT", register, json=_info("a:1"), headers=bearer("tok-a")))[0] == 200
        status, text = await _text(http, "PUT", register, json=_info("b:1"), headers=bearer("tok-b"))
        assert status == 403
        assert "namespace a" in text
        assert (await _text(http, "PUT", register, json=_info("c:1")))[0] == 401
        status, text = await _text(
            http, "GET", f"{server.url}/ns/a/get_transfer_engine_info?rank=0", headers=bearer("tok-a")
        )
        assert (status, '["a:1"' in text) == (200, True)
        async with http.get(f"{a}/namespaces", headers=bearer("tok-b")) as reply:
            assert (await reply.json())["listeners"] == []


async def test_a_taken_listener_port_is_address_in_use_and_frees_the_main_port() -> None:
    """BootstrapServer: a listener's port held by another process is AddressInUse naming it, and the main
    port the server had bound is closed again."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        main = quiet_port()
        server = BootstrapServer(port=main, listen=(NamespaceListener(taken, "a"),))
        with pytest.raises(AddressInUse, match=f"port {taken}"):
            await server.start()
    with socket.socket() as again:
        again.bind(("127.0.0.1", main))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("7001=a", NamespaceListener(7001, "a")),
        ("0=team.model_v2", NamespaceListener(0, "team.model_v2")),
        ("0.0.0.0:7001=a", NamespaceListener(7001, "a", "0.0.0.0")),
        ("[::1]:7001=a", NamespaceListener(7001, "a", "::1")),
    ],
)
def test_a_listen_spec_is_read(spec: str, expected: NamespaceListener) -> None:
    """[HOST:]PORT=NAMESPACE, an IPv6 host in brackets; it is written back as given."""
    assert NamespaceListener.parse(spec) == expected
    assert str(expected) == spec


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--listen", "foo"), "'foo' is not [HOST:]PORT=NAMESPACE"),
        (("--listen", "7001"), "'7001' is not [HOST:]PORT=NAMESPACE"),
        (("--listen", "7001="), "'7001=' names no namespace"),
        (("--listen", "7001=a/b"), "Invalid namespace 'a/b'"),
        (("--listen", "x:y=a"), "'y' is not a port number"),
        (("--listen", "::1:7001=a"), "write an IPv6 host in brackets"),
        (("--listen", "70000=a"), "between 0 and 65535"),
    ],
)
def test_a_bad_listen_spec_is_one_line_and_status_2(args: tuple[str, ...], said: str) -> None:
    """A spec that is not [HOST:]PORT=NAMESPACE is refused as argparse reads it: one line, status 2."""
    assert_one_line_error(tool(*args), 2, said)


@pytest.mark.parametrize(
    ("listen", "said"),
    [
        (("7001=a", "7001=b"), "--listen 7001=b takes port 7001, which --listen 7001=a takes already"),
        (("6789=a",), "--listen 6789=a takes port 6789, which --port takes already"),
    ],
)
def test_a_port_taken_twice_is_refused(listen: tuple[str, ...], said: str) -> None:
    """Each listener has a port of its own, and none is the main port (port 0 may repeat)."""
    with pytest.raises(ValueError, match=said):
        ServerConfig(listen=tuple(NamespaceListener.parse(spec) for spec in listen))
    assert len(ServerConfig(port=0, listen=_listeners("a", "b")).listen) == 2


def test_a_port_taken_twice_on_the_command_line_is_one_line() -> None:
    """python -m aiobootstrap --listen 7001=a --listen 7001=b: one line, status 2, nothing bound."""
    process = launch("--port", "0", "--listen", "7001=a", "--listen", "7001=b")
    out, err = process.communicate(timeout=GUARD)
    completed = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    assert_one_line_error(completed, 2, "give each listener a port of its own")


def test_a_taken_listener_port_is_the_one_line_of_a_taken_port() -> None:
    """A --listen port another process holds: the taken port's one line (naming it, and --listen as the way
    out), status 2."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        process = launch("--port", "0", "--listen", f"{taken}=a")
        out, err = process.communicate(timeout=GUARD)
    completed = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    assert_one_line_error(
        completed, 2, f"Cannot listen on 127.0.0.1:{taken}: another process already holds port"
    )
    assert "pick another with --listen" in err


@pytest.fixture(scope="module")
def served() -> Iterator[list[str]]:
    """``python -m aiobootstrap --port 0 --listen 0=a --listen 127.0.0.1:0=b``: its start-up lines."""
    process = launch("--port", "0", "--listen", "0=a", "--listen", "127.0.0.1:0=b")
    assert process.stdout is not None
    lines = [process.stdout.readline() for _ in range(3)]
    yield lines
    process.terminate()
    process.communicate(timeout=GUARD)


def _url_after(line: str, prefix: str) -> str:
    assert line.startswith(prefix), line
    return line.removeprefix(prefix).strip()


def test_the_start_up_lines_name_each_listener_after_the_main_one(served: list[str]) -> None:
    """The first line is the main listener's as ever; each listener's follows with its real port, worded so
    that it never matches the first (a script reading 'aiobootstrap listening on' finds the main one)."""
    main = _url_after(served[0], LISTENING)
    a, b = _url_after(served[1], ALSO.format("a")), _url_after(served[2], ALSO.format("b"))
    ports = {url.rpartition(":")[2] for url in (main, a, b)}
    assert len(ports) == 3
    assert "0" not in ports
    assert all(LISTENING not in line for line in served[1:])


def test_status_names_the_listener_it_was_pointed_at_and_the_listeners(served: list[str]) -> None:
    """register, wait and status at a listener's URL report that listener's namespace (status its URL too);
    at the main URL, status --namespace a does the same, and --namespaces lists every listener."""
    main = _url_after(served[0], LISTENING)
    a, b = _url_after(served[1], ALSO.format("a")), _url_after(served[2], ALSO.format("b"))
    registered = tool("register", "--url", a, "--rank", "0", "--session-id", "a:1")
    assert registered.stdout == "registered rank 0 in namespace a\n"
    waited = tool("wait", "--url", a, "--world-size", "1", "--timeout", "5")
    assert waited.stdout == "rank 0 registered in namespace a\n"
    for args in (("--url", a), ("--url", main, "--namespace", "a")):
        result = tool("status", *args)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[:2] == [
            "namespace a, version 1, 0 waiting",
            f"also listening on {a}",
        ]
    result = tool("status", "--url", main, "--namespaces")
    assert result.stdout.splitlines()[-3:] == [
        "2 listeners (--listen)",
        f"  namespace a also listening on {a}",
        f"  namespace b also listening on {b}",
    ]
    result = tool("get", "--url", a, "--namespace", "b", "--rank", "0")
    assert result.returncode != 0
    assert "serves namespace a alone" in result.stderr


async def test_a_wait_parked_on_a_listener_is_woken_by_a_registration_on_the_main_port(
    server: BootstrapServer, http: aiohttp.ClientSession
) -> None:
    """A get parked on a's port is answered by a registration through the main port's /ns/a/ (the one
    registry), and one parked there when the server stops gets the 503 every parked wait gets."""
    a = dict(server.listeners)["a"]
    waiting = asyncio.create_task(_text(http, "GET", f"{a}/get_transfer_engine_info?rank=0&wait=30"))
    await until(lambda: server.registry.parked_in("a") == 1)
    register = f"{server.url}/ns/a/register_transfer_engine_info"
    assert (await _text(http, "PUT", register, json=_info("a:1")))[0] == 200
    status, text = await asyncio.wait_for(waiting, GUARD)
    assert status == 200
    assert '["a:1"' in text
    stopped = asyncio.create_task(_text(http, "GET", f"{a}/get_transfer_engine_info?rank=1&wait=30"))
    await until(lambda: server.registry.parked_in("a") == 1)
    await server.close()
    status, text = await asyncio.wait_for(stopped, GUARD)
    assert status == 503
    assert "shutting down" in text


async def test_two_vllm_deployments_with_dp_rank_0_each_on_their_own_port(
    server: BootstrapServer, http: aiohttp.ClientSession
) -> None:
    """vLLM's bootstrap_server_address names host:port alone: two deployments' workers, each dp rank 0 of an
    engine of its own, register on their own listeners without an Engine ID mismatch, and each /query
    (on its port, or the main port's /ns/NAME/) shows its own."""
    urls = dict(server.listeners)
    for name, url in urls.items():
        worker = {
            "engine_id": f"engine-{name}",
            "dp_rank": 0,
            "tp_rank": 0,
            "pp_rank": 0,
            "addr": f"tcp://{name}:1",
        }
        assert (await _text(http, "POST", f"{url}/register", json=worker))[0] == 200
    for name, url in urls.items():
        for base in (url, f"{server.url}/ns/{name}"):
            async with http.get(f"{base}/query") as reply:
                assert await reply.json() == {
                    "0": {"engine_id": f"engine-{name}", "worker_addr": {"0": {"0": f"tcp://{name}:1"}}}
                }


async def test_a_listener_speaks_tls_as_the_main_port_does(tmp_path: Path) -> None:
    """With a certificate, a listener's URL is https:// and a client trusting the CA registers and gets
    through it, unprefixed, in the listener's namespace."""
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(key))
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    config = ServerConfig(port=0, tls_cert=str(cert), tls_key=str(key), listen=_listeners("a"))
    async with BootstrapServer(config) as server:
        a = dict(server.listeners)["a"]
        assert a.startswith("https://127.0.0.1:")
        async with BootstrapClient(a, ssl=trusting) as client:
            await client.register(0, session_id="tls", weights_info_dict={})
        async with BootstrapClient(server.url, namespace="a", ssl=trusting) as client:
            assert (await client.get(0, timeout=GUARD)).session_id == "tls"


async def test_a_server_serves_listener_sockets_bound_already(http: aiohttp.ClientSession) -> None:
    """start(socks, listen_socks=...) serves the sockets the caller bound (as the CLI binds them before
    aiohttp loads), each listener on its own; a count that does not match config.listen is a ValueError
    that closes them."""
    listen = _listeners("a", "b")
    socks = bind_sockets("127.0.0.1", 0)
    bound = bind_each([("127.0.0.1", 0), ("127.0.0.1", 0)])
    server = BootstrapServer(port=0, listen=listen)
    await server.start(socks, listen_socks=bound)
    try:
        ports = [str(each[0].getsockname()[1]) for each in bound]
        assert [url.rpartition(":")[2] for _, url in server.listeners] == ports
        a = dict(server.listeners)["a"]
        assert (await _text(http, "PUT", f"{a}/register_transfer_engine_info", json=_info("a:1")))[0] == 200
    finally:
        await server.close()
    socks, bound = bind_sockets("127.0.0.1", 0), bind_each([("127.0.0.1", 0)])
    with pytest.raises(ValueError, match="1 entries for 2 listeners"):
        await BootstrapServer(port=0, listen=listen).start(socks, listen_socks=bound)
    assert all(sock.fileno() == -1 for sock in [*socks, *bound[0]])
