"""Bearer-token authentication and TLS: the server refuses before reading, the client sends its token."""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
from pathlib import Path

import pytest
import trustme
from aiohttp import web
from multidict import CIMultiDict

from aiobootstrap import (
    BootstrapClient,
    BootstrapError,
    BootstrapServer,
    ServerConfig,
    Unauthorized,
    create_app,
)
from aiobootstrap.server.access import bearer_credentials
from aiobootstrap.server.tokens import TokenSet

from .helpers.cli import _environ, launch, serve
from .helpers.registry import stored
from .helpers.tools import tool

TOKEN = "s3cret-token_value"
GUARD = 10.0
BODY = {"rank": 0, "transfer_engine_info": {"session_id": "10.0.0.1:1", "weights_info_dict": {}}}
ROUTES = [
    ("PUT", "/register_transfer_engine_info"),
    ("DELETE", "/register_transfer_engine_info?rank=0"),
    ("GET", "/get_transfer_engine_info?rank=0"),
    ("GET", "/get_transfer_engine_info_batch?ranks=0-3"),
    ("GET", "/ranks"),
    ("GET", "/no/such/route"),
    ("PUT", "/ns/team-a/register_transfer_engine_info"),
    ("DELETE", "/ns/team-a/register_transfer_engine_info?rank=0"),
    ("GET", "/ns/team-a/get_transfer_engine_info?rank=0"),
    ("GET", "/ns/team-a/ranks"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
]


@pytest.fixture
async def client(aiohttp_client):
    return await aiohttp_client(create_app(ServerConfig(auth_token=TOKEN)))


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize(
    "headers",
    [{}, _bearer("wrong"), _bearer(TOKEN + "x"), _bearer(TOKEN[:-1]), {"Authorization": f"Basic {TOKEN}"}],
    ids=["none", "wrong", "longer", "shorter", "basic"],
)
async def test_every_route_but_the_probes_refuses_a_missing_or_wrong_token(client, method, path, headers):
    """Without the right bearer token every route answers 401 JSON with WWW-Authenticate: Bearer."""
    response = await client.request(method, path, headers=headers, json=BODY if method == "PUT" else None)
    assert response.status == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    detail = (await response.json())["detail"]
    assert "token" in detail


@pytest.mark.parametrize("path", ["/health", "/ns/team-a/health", "/ready"])
async def test_the_probes_answer_without_a_token(client, path):
    """/health (in any namespace) and /ready stay open: load balancers and probes need no secret."""
    response = await client.get(path)
    assert response.status == 200
    assert await response.text() == "OK"


@pytest.mark.parametrize(
    ("page", "heading", "says"),
    [
        ("api.md", "## `GET /ready`", "never needs a token"),
        ("operations.md", "## In a container", "need no token"),
    ],
)
def test_the_docs_say_the_probes_need_no_token(page, heading, says):
    """docs/api.md's /ready and operations.md's container probes say what the test above pins."""
    text = (Path(__file__).resolve().parent.parent / "docs" / page).read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    section = " ".join(text[start : end if end != -1 else len(text)].split())
    assert "/ready" in section
    assert says in section
    assert "needs the token" not in section.lower()


async def test_the_right_token_is_accepted_on_every_route(client):
    """With the token the routes behave as without authentication."""
    put = await client.put("/register_transfer_engine_info", json=BODY, headers=_bearer(TOKEN))
    assert put.status == 200
    get = await client.get("/get_transfer_engine_info?rank=0", headers={"authorization": f"bearer {TOKEN}"})
    assert get.status == 200
    assert (await get.json())["remote_instance_transfer_engine_info"][0] == "10.0.0.1:1"


async def test_a_repeated_authorization_header_is_refused(client):
    """Two Authorization headers are refused even when one carries the token: the server does not guess."""
    headers = CIMultiDict([("Authorization", f"Bearer {TOKEN}"), ("Authorization", "Bearer wrong")])
    put = await client.put("/register_transfer_engine_info", json=BODY, headers=headers)
    assert put.status == 401
    assert "exactly one" in (await put.json())["detail"]
    listing = await client.get("/ranks", headers=_bearer(TOKEN))
    assert (await listing.json())["count"] == 0


async def test_a_refused_register_changes_nothing(client):
    """A register with a wrong token stores nothing."""
    put = await client.put("/register_transfer_engine_info", json=BODY, headers=_bearer("wrong"))
    assert put.status == 401
    listing = await client.get("/ranks", headers=_bearer(TOKEN))
    assert (await listing.json())["count"] == 0


async def test_the_token_is_checked_before_the_body_is_read(client):
    """A register announcing a body it never sends is refused at once, not after the body timeout."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(
        b"PUT /register_transfer_engine_info HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
    assert head.startswith(b"HTTP/1.1 401")
    writer.close()


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ("", False),
        ("Bearer", False),
        ("Bearer ", False),
        (f"Bearer {TOKEN}", True),
        (f"BEARER {TOKEN}", True),
        (f"Bearer  {TOKEN} ", True),
        (f"Bearer {TOKEN}\udcff", False),
        (f"Token {TOKEN}", False),
    ],
)
def test_bearer_matching(header, ok):
    """The Authorization parser takes the Bearer scheme in any case and nothing else."""
    presented = bearer_credentials(header)
    assert (presented is not None and TokenSet.single(TOKEN).lookup(presented) is not None) is ok


@pytest.mark.parametrize("token", ["", "two words", "tab\there", "ünïcode", "new\nline"])
def test_config_refuses_tokens_that_cannot_travel_in_a_header(token):
    """A token must be non-empty printable ASCII without spaces."""
    with pytest.raises(ValueError, match="auth token"):
        ServerConfig(auth_token=token)


def test_config_repr_hides_the_token():
    """The token never shows in a logged or printed config."""
    assert TOKEN not in repr(ServerConfig(auth_token=TOKEN))


async def test_client_sends_its_token_end_to_end():
    """A BootstrapClient with token= registers and gets; one without it gets Unauthorized at once."""
    async with BootstrapServer(port=0, auth_token=TOKEN) as server:
        async with BootstrapClient(server.url, token=TOKEN) as client:
            await client.register(2, session_id="s", weights_info_dict={"w": 1})
            info = await client.get(2, timeout=GUARD)
            assert info.weights_info_dict == {"w": 1}
            assert (await client.list_ranks()).ranks[0].rank == 2
        async with BootstrapClient(server.url) as anonymous:
            assert await anonymous.health()
            with pytest.raises(Unauthorized, match="Bearer token"):
                await anonymous.get(2, timeout=GUARD)
        async with BootstrapClient(server.url, token="wrong") as wrong:
            with pytest.raises(Unauthorized, match="not valid"):
                await wrong.register(3, session_id="s", weights_info_dict={}, timeout=GUARD)
        assert await stored(server.registry, 3) is None


# -- TLS ----------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_files(ca: trustme.CA, tmp_path: Path) -> tuple[str, str]:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    cert.private_key_pem.write_to_path(str(key_path))
    return str(cert_path), str(key_path)


@pytest.fixture
def trusting(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


async def test_tls_end_to_end(tls_files, trusting):
    """With a certificate the server speaks HTTPS and a client trusting its CA registers and gets."""
    cert, key = tls_files
    async with BootstrapServer(port=0, tls_cert=cert, tls_key=key, auth_token=TOKEN) as server:
        assert server.url.startswith("https://127.0.0.1:")
        async with BootstrapClient(server.url, token=TOKEN, ssl=trusting) as client:
            await client.register(0, session_id="tls", weights_info_dict={})
            assert (await client.get(0, timeout=GUARD)).session_id == "tls"


async def test_tls_client_without_trust_fails_at_once(tls_files):
    """A client that does not trust the certificate gets a clear error, not endless retries."""
    cert, key = tls_files
    async with (
        BootstrapServer(port=0, tls_cert=cert, tls_key=key) as server,
        BootstrapClient(server.url, ssl=ssl.create_default_context()) as client,
    ):
        with pytest.raises(BootstrapError, match="TLS"):
            await client.register(0, session_id="s", weights_info_dict={}, timeout=GUARD)


async def test_tls_with_an_unreadable_certificate_fails_to_start(tmp_path):
    """A missing certificate is a BootstrapError naming the file, before anything listens."""
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(BootstrapError, match=r"missing\.pem"):
        await BootstrapServer(port=0, tls_cert=missing, tls_key=missing).start()


def test_config_needs_both_cert_and_key():
    """A certificate without a key (or the reverse) is refused with a message naming both flags."""
    with pytest.raises(ValueError, match="--tls-key"):
        ServerConfig(tls_cert="cert.pem")


# -- the CLI ------------------------------------------------------------


def _refused(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """``python -m aiobootstrap --port 0 ARGS``, which should refuse to serve: its exit status and stderr."""
    process = launch("--port", "0", *args, env=_environ() if env is None else env)
    _, stderr = process.communicate(timeout=GUARD)
    return process.returncode, stderr


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "cannot read the auth token file"),
        ("empty", "is empty"),
        ("directory", "cannot read the auth token file"),
    ],
)
def test_cli_refuses_a_bad_token_file(tmp_path, setup, message):
    """An unreadable or empty token file: one line on stderr, exit 2, no traceback."""
    path = tmp_path / "token"
    if setup == "empty":
        path.write_text("\n")
    elif setup == "directory":
        path.mkdir()
    status, stderr = _refused("--auth-token-file", str(path))
    assert status == 2
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_cli_refuses_an_empty_token_variable():
    """AIOBOOTSTRAP_AUTH_TOKEN set but empty is a mistake, not a wish for no auth."""
    status, stderr = _refused(env=_environ(" "))
    assert status == 2
    assert "AIOBOOTSTRAP_AUTH_TOKEN is set but empty" in stderr


def test_cli_refuses_a_missing_certificate(tmp_path):
    """A TLS certificate that cannot be loaded: one line naming it, non-zero exit."""
    missing = str(tmp_path / "nope.pem")
    status, stderr = _refused("--tls-cert", missing, "--tls-key", missing)
    assert status != 0
    assert "nope.pem" in stderr
    assert len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("source", ["file", "env"])
async def test_cli_serves_with_a_token(tmp_path, source):
    """The token from --auth-token-file or the environment guards the served routes."""
    if source == "file":
        (tmp_path / "token").write_text(TOKEN + "\n")
        served = serve("--log-level", "warning", "--auth-token-file", str(tmp_path / "token"), env=_environ())
    else:
        served = serve("--log-level", "warning", env=_environ(TOKEN))
    try:
        async with BootstrapClient(served.url, token=TOKEN) as client:
            await client.register(1, session_id="cli", weights_info_dict={})
        async with BootstrapClient(served.url) as anonymous:
            with pytest.raises(Unauthorized):
                await anonymous.list_ranks()
    finally:
        served.process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.to_thread(served.process.communicate, timeout=GUARD)
    assert served.process.returncode == 0, stderr
    assert TOKEN not in stderr


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ("", b"401"),
        (f"Authorization: Bearer {TOKEN}\r\nContent-Length: {1 << 30}\r\n", b"413"),
        (f"Authorization: Bearer {TOKEN}\r\nContent-Length: 10\r\n", b"100"),
    ],
    ids=["no-token", "too-large", "invited"],
)
async def test_expect_continue_is_refused_before_the_body_is_invited(client, headers, status):
    """Expect: 100-continue gets the 401 or 413 straight away; only an acceptable request is invited."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    head = "PUT /register_transfer_engine_info HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
    writer.write(f"{head}{headers}\r\n".encode())
    await writer.drain()
    reply = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
    assert reply.split(b" ")[1] == status
    writer.close()


async def test_an_unknown_expectation_is_417_json(client):
    """An Expect other than 100-continue is a 417 with a JSON detail."""
    response = await client.get("/health", headers={"Expect": "teapot"})
    assert response.status == 417
    assert "100-continue" in (await response.json())["detail"]


async def _expect_reply(host: str, port: int, request_line: str, headers: str) -> tuple[bytes, bytes]:
    """The first reply to a request sent with its head only: (head, body); a 100 Continue has no body."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"{request_line}\r\nHost: x\r\nContent-Length: 10\r\n{headers}\r\n".encode())
    await writer.drain()
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
        if head.startswith(b"HTTP/1.1 100"):
            return head, b""
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        return head, await asyncio.wait_for(reader.readexactly(length), GUARD)
    finally:
        writer.close()


@pytest.mark.parametrize(
    "route", ["PUT /no/such/route", "PUT /ns/x/nope", "POST /register_transfer_engine_info"]
)
async def test_expect_on_an_unknown_route_is_refused_before_the_body_is_invited(client, route):
    """With a token, Expect: 100-continue on an unknown route (or method) gets the 401, never 100 Continue."""
    head, body = await _expect_reply(
        client.host, client.port, f"{route} HTTP/1.1", "Expect: 100-continue\r\n"
    )
    assert head.startswith(b"HTTP/1.1 401"), head
    assert "token" in json.loads(body)["detail"]


@pytest.mark.parametrize(
    ("route", "status"),
    [("PUT /no/such/route", b"404"), ("POST /register_transfer_engine_info", b"405")],
)
async def test_expect_on_an_unknown_route_with_the_token_is_the_json_404_or_405(client, route, status):
    """With the right token an unknown route's Expect is answered 404 (or 405) in JSON, the body not invited."""
    auth = f"Authorization: Bearer {TOKEN}\r\nExpect: 100-continue\r\n"
    head, body = await _expect_reply(client.host, client.port, f"{route} HTTP/1.1", auth)
    assert head.split(b" ")[1] == status, head
    assert json.loads(body)["detail"]


@pytest.mark.parametrize("route", ["GET /no/such/route", "GET /health"])
async def test_an_unknown_expectation_on_any_route_is_417_json(client, route):
    """Expect: teapot is a JSON 417 on an unknown route as on a known one."""
    head, body = await _expect_reply(client.host, client.port, f"{route} HTTP/1.1", "Expect: teapot\r\n")
    assert head.startswith(b"HTTP/1.1 417"), head
    assert b"application/json" in head
    assert "100-continue" in json.loads(body)["detail"]


async def test_unknown_routes_without_expect_are_unchanged(aiohttp_client):
    """Without Expect an unknown route is the usual JSON 404 and a wrong method a 405 with Allow."""
    open_client = await aiohttp_client(create_app(ServerConfig()))
    missing = await open_client.put("/no/such/route", data=b"x")
    assert missing.status == 404
    wrong = await open_client.post("/register_transfer_engine_info", data=b"x")
    assert wrong.status == 405
    assert "PUT" in wrong.headers["Allow"]
    head, _ = await _expect_reply(
        open_client.host, open_client.port, "PUT /nope HTTP/1.1", "Expect: 100-continue\r\n"
    )
    assert head.startswith(b"HTTP/1.1 404"), "no body invited for a route that does not exist"


async def test_cli_serves_tls_and_the_tools_trust_a_given_ca(tls_files, ca, tmp_path, trusting, monkeypatch):
    """--tls-cert/--tls-key serve HTTPS from the CLI; the tools reach it with --cacert and the token."""
    cert, key = tls_files
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    weights = tmp_path / "weights.json"
    weights.write_text("{}")
    monkeypatch.setenv("AIOBOOTSTRAP_AUTH_TOKEN", TOKEN)
    served = serve("--log-level", "warning", "--tls-cert", cert, "--tls-key", key, env=_environ(TOKEN))
    try:
        assert served.url.startswith("https://")
        registered = await asyncio.to_thread(
            tool, "register", "--url", served.url, "--cacert", str(ca_file), "--rank", "4",
            "--session-id", "via-tool", "--weights-file", str(weights),
        )  # fmt: skip
        assert registered.returncode == 0, registered.stderr
        async with BootstrapClient(served.url, token=TOKEN, ssl=trusting) as client:
            assert (await client.get(4, timeout=GUARD)).session_id == "via-tool"
        untrusting = await asyncio.to_thread(tool, "status", "--url", served.url)
        assert untrusting.returncode != 0
        assert "TLS" in untrusting.stderr
        assert len(untrusting.stderr.strip().splitlines()) == 1
    finally:
        served.process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(served.process.communicate, timeout=GUARD)
    assert served.process.returncode == 0


def test_tool_refuses_a_missing_ca_file(tmp_path):
    """--cacert naming a missing file: one line, exit status 2."""
    result = tool("status", "--url", "https://127.0.0.1:1", "--cacert", str(tmp_path / "nope.pem"))
    assert result.returncode == 2
    assert result.stderr.strip().endswith("nope.pem: No such file or directory")


async def test_mounted_under_another_app_expect_on_an_unknown_route_is_refused_first(aiohttp_client):
    """As a sub-app, an unknown route under its prefix still gets the token's 401 before the body is invited."""
    outer = web.Application()
    outer.add_subapp("/bootstrap", create_app(ServerConfig(auth_token=TOKEN)))
    client = await aiohttp_client(outer)
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(
        b"PUT /bootstrap/no/such/route HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
    )
    await writer.drain()
    reply = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
    assert reply.split(b" ")[1] == b"401"
    writer.close()
