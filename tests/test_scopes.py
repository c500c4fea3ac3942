"""Tokens with scopes (SPEC section 12): every route, every kind of token, both --auth-reads settings.

One table says who may do what; every route the app serves is in ``ROUTES``
with the access this test expects of it, so a route added to the app fails
here until it is classified. Each refused request is checked to have read
nothing (a bare ``{"detail"}``) and changed nothing (read back through the
all-scope token).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from aiobootstrap import (
    BootstrapClient,
    BootstrapServer,
    Forbidden,
    ServerConfig,
    SyncBootstrapClient,
    ThreadedBootstrapServer,
    Unauthorized,
    create_app,
)
from aiobootstrap.server.access import Access
from aiobootstrap.server.face_registry import installed_faces
from aiobootstrap.server.faces.engine_info.face import FACE as ENGINE_INFO
from aiobootstrap.server.openapi import document
from aiobootstrap.server.tokens import TokenSet

from .helpers.prefill import rank_body
from .helpers.waits import GUARD

TOKEN_FILE = """\
# team A and team B write their own namespaces; the monitor reads them all
own-token-aaaa ns=team-a
other-token-bbbb ns=team-b
reader-token-cccc read
all-token-dddd
"""
TOKENS = TokenSet.parse(TOKEN_FILE)
ALL = "all-token-dddd"
NAMESPACE = "team-a"

WHO = {
    "none": None,
    "wrong": "own-token-aaaax",
    "read": "reader-token-cccc",
    "other namespace": "other-token-bbbb",
    "this namespace": "own-token-aaaa",
    "all-scope": ALL,
}
"""The six callers: no token, an unknown one, a read-only one, a writer of another namespace, of this one, and all."""

EXPECTED: dict[tuple[str, Access], tuple[int, ...]] = {
    # --auth-reads token           none wrong read other this  all
    ("token", Access.PROBE): (200, 200, 200, 200, 200, 200),
    ("token", Access.SERVER): (401, 401, 200, 200, 200, 200),
    ("token", Access.READ): (401, 401, 200, 403, 200, 200),
    ("token", Access.WRITE): (401, 401, 403, 403, 200, 200),
    # --auth-reads open
    ("open", Access.PROBE): (200, 200, 200, 200, 200, 200),
    ("open", Access.SERVER): (200, 401, 200, 200, 200, 200),
    ("open", Access.READ): (200, 401, 200, 200, 200, 200),
    ("open", Access.WRITE): (401, 401, 403, 403, 200, 200),
}
"""The one table: the status for each setting, kind of route and caller (in ``WHO``'s order)."""

_NS = f"/ns/{NAMESPACE}"
_INFO = {"rank": 0, "transfer_engine_info": {"session_id": "10.0.0.9:1", "weights_info_dict": {}}}
_CONFIG = {"rank": 0, "parallelism_config": {"tp_size": 8}}
_URL = {"url": "http://encoder-9:8000"}
_NO_LEASE = "no-such-lease"

_PREFILL_RANK = rank_body(0, 0, tp_size=1, dp_size=1)
_VLLM_WORKER = {"engine_id": "e", "dp_rank": 0, "tp_rank": 1, "pp_rank": 0, "addr": "tcp://10.0.0.9:5557"}
_ALL_PREFILL = "prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1"

ROUTES: list[tuple[str, str, dict[str, Any] | None, Access]] = [
    ("GET", f"{_NS}/health", None, Access.PROBE),
    ("GET", "/ready", None, Access.PROBE),
    ("GET", "/metrics", None, Access.SERVER),
    ("GET", "/openapi.json", None, Access.SERVER),
    ("GET", "/namespaces", None, Access.SERVER),
    ("PUT", f"{_NS}/register_transfer_engine_info", _INFO, Access.WRITE),
    ("DELETE", f"{_NS}/register_transfer_engine_info?rank=0", None, Access.WRITE),
    ("GET", f"{_NS}/get_transfer_engine_info?rank=0", None, Access.READ),
    ("GET", f"{_NS}/get_transfer_engine_info_batch?ranks=0", None, Access.READ),
    ("PUT", f"{_NS}/register_parallelism_config", _CONFIG, Access.WRITE),
    ("DELETE", f"{_NS}/register_parallelism_config?rank=0", None, Access.WRITE),
    ("GET", f"{_NS}/get_parallelism_config?rank=0", None, Access.READ),
    ("GET", f"{_NS}/get_parallelism_config_batch?ranks=0", None, Access.READ),
    ("GET", f"{_NS}/ranks", None, Access.READ),
    ("POST", f"{_NS}/register_encoder_url", _URL, Access.WRITE),
    ("DELETE", f"{_NS}/unregister_encoder_url", {"url": "http://encoder-0:8000"}, Access.WRITE),
    ("GET", f"{_NS}/list_encoder_urls", None, Access.READ),
    ("GET", f"{_NS}/encoder_url_health", None, Access.READ),
    ("GET", f"{_NS}/watch?after=0", None, Access.READ),
    # SGLang's prefill bootstrap: a prefill rank and a room are written, decode reads.
    ("PUT", f"{_NS}/route", _PREFILL_RANK, Access.WRITE),
    ("GET", f"{_NS}/route?{_ALL_PREFILL}", None, Access.READ),
    ("DELETE", f"{_NS}/route?{_ALL_PREFILL}", None, Access.WRITE),
    ("POST", f"{_NS}/register_dp_rank", {"bootstrap_room": 1, "dp_rank": 0}, Access.WRITE),
    ("POST", f"{_NS}/query_dp_ranks", {"bootstrap_rooms": [1]}, Access.READ),
    ("GET", f"{_NS}/prefill", None, Access.READ),
    # Mooncake's metadata: a key is written by its engine, read by its peers.
    ("PUT", f"{_NS}/metadata?key=mooncake/ram/a", {"buffers": []}, Access.WRITE),
    ("GET", f"{_NS}/metadata?key=mooncake/ram/a", None, Access.READ),
    ("DELETE", f"{_NS}/metadata?key=mooncake/ram/a", None, Access.WRITE),
    ("GET", f"{_NS}/mooncake", None, Access.READ),
    # vLLM's Mooncake connector bootstrap: a prefill worker registers, decode queries.
    ("POST", f"{_NS}/register", _VLLM_WORKER, Access.WRITE),
    ("GET", f"{_NS}/query", None, Access.READ),
    ("GET", f"{_NS}/vllm", None, Access.READ),
    # The page (SPEC section 11): a read; a client that does not ask for HTML gets the JSON refusals.
    ("GET", f"{_NS}/", None, Access.READ),
    ("POST", f"{_NS}/leases", {"ttl": 10}, Access.WRITE),
    # No lease has that id: a caller let through gets the lease's 404, one refused 401 or 403.
    ("POST", f"{_NS}/leases/{_NO_LEASE}/keepalive", None, Access.WRITE),
    ("GET", f"{_NS}/leases/{_NO_LEASE}", None, Access.READ),
    ("DELETE", f"{_NS}/leases/{_NO_LEASE}", None, Access.WRITE),
]


def _headers(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


async def _scoped_client(aiohttp_client: Any, reads: str) -> TestClient[web.Request, web.Application]:
    """A server with ``TOKENS`` and ``reads``, holding what ``_fill`` puts in team-a."""
    client: TestClient[web.Request, web.Application] = await aiohttp_client(
        create_app(ServerConfig(auth_tokens=TOKENS, auth_reads=reads))  # type: ignore[arg-type]
    )
    await _fill(client)
    return client


async def _fill(client: TestClient[web.Request, web.Application]) -> None:
    """Rank 0 of each kind and one encoder URL in team-a (again, after a write took them away)."""
    admin = _headers(ALL)
    for path, body in [
        ("/register_transfer_engine_info", _INFO),
        ("/register_parallelism_config", _CONFIG),
    ]:
        assert (await client.put(f"{_NS}{path}", json=body, headers=admin)).status == 200
    reply = await client.post(
        f"{_NS}/register_encoder_url", json={"url": "http://encoder-0:8000"}, headers=admin
    )
    assert reply.status == 200
    assert (await client.put(f"{_NS}/route", json=_PREFILL_RANK, headers=admin)).status == 200
    assert (
        await client.put(f"{_NS}/metadata?key=mooncake/ram/a", json={"buffers": []}, headers=admin)
    ).status == 200


async def _state(client: TestClient[web.Request, web.Application]) -> list[Any]:
    """Everything team-a holds, read back through the all-scope token."""
    admin = _headers(ALL)
    seen = []
    for path in [
        "/ranks?kind=transfer_engine_info",
        "/ranks?kind=parallelism_config",
        "/list_encoder_urls",
        f"/route?{_ALL_PREFILL}",
        "/metadata?key=mooncake/ram/a",
        "/query",
    ]:
        reply = await client.get(f"{_NS}{path}", headers=admin)
        assert reply.status == 200
        body = await reply.json()
        for rank in body.get("ranks", []):
            rank.pop("age", None)  # the one field that moves by itself
        seen.append(body)
    return seen


@pytest.mark.parametrize("reads", ["token", "open"])
@pytest.mark.parametrize(
    ("method", "path", "body", "access"), ROUTES, ids=[f"{m} {p}" for m, p, *_ in ROUTES]
)
async def test_who_may_do_what(aiohttp_client, reads, method, path, body, access):
    """Each caller gets the table's status on each route; a refused one reads nothing and changes nothing."""
    client = await _scoped_client(aiohttp_client, reads)
    for (who, token), expected in zip(WHO.items(), EXPECTED[reads, access], strict=True):
        before = await _state(client)
        reply = await client.request(method, path, json=body, headers=_headers(token))
        if expected == 200 and _NO_LEASE in path:
            expected = 404  # let through, to a lease that is not there
        assert reply.status == expected, f"{who}: {reply.status} {await reply.text()}"
        if expected in (200, 404):
            await _fill(client)  # what a write took away, for the next caller
            continue
        detail = await reply.json()
        assert list(detail) == ["detail"], f"{who}: a refusal carries only its detail"
        assert await _state(client) == before, f"{who}: a refused request changed something"
        if expected == 403:
            assert "may not" in detail["detail"] or "may only read" in detail["detail"]
            assert NAMESPACE in detail["detail"]
        else:
            assert reply.headers["WWW-Authenticate"].startswith("Bearer")


async def test_the_table_names_every_route_the_app_serves():
    """ROUTES above covers every method and path the app serves (HEAD aside): a new route must be added."""
    served = {
        (route.method, route.resource.canonical.replace("{namespace}", NAMESPACE))
        for route in create_app().router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    tested = {(method, path.split("?")[0].replace(_NO_LEASE, "{lease}")) for method, path, *_ in ROUTES}
    namespaced_twins = {(m, p.removeprefix(_NS)) for m, p in tested if p.startswith(_NS)}
    assert served == tested | namespaced_twins


def test_an_unclassified_route_stops_the_app():
    """A route its face declares no Access for is refused when the app is made, not served unguarded."""
    table = dict(ENGINE_INFO.access())
    del table["GET", "/ranks"]
    engine_info = dataclasses.replace(ENGINE_INFO, access=lambda: table)
    with pytest.raises(LookupError, match="GET /ranks"):
        create_app(faces=[engine_info if face is ENGINE_INFO else face for face in installed_faces()])


@pytest.mark.parametrize(
    ("token", "method", "path", "says"),
    [
        ("reader-token-cccc", "PUT", "/register_transfer_engine_info", "may only read: it may not write to namespace default"),
        ("own-token-aaaa", "PUT", "/ns/team-b/register_transfer_engine_info", "may not write to namespace team-b: it covers namespace team-a"),
        ("own-token-aaaa", "GET", "/ns/team-b/ranks", "may not read namespace team-b: it covers namespace team-a"),
        ("own-token-aaaa", "GET", "/ranks", "may not read namespace default"),
    ],
)  # fmt: skip
async def test_the_403_says_what_the_token_may_not_do(aiohttp_client, token, method, path, says):
    """A known token out of scope: 403 with a detail naming the namespace and what the token covers."""
    client = await aiohttp_client(create_app(ServerConfig(auth_tokens=TOKENS)))
    reply = await client.request(method, path, json=_INFO, headers=_headers(token))
    assert reply.status == 403
    assert says in (await reply.json())["detail"]


async def test_the_unprefixed_routes_are_the_default_namespace(aiohttp_client):
    """ns=default covers the unprefixed routes, and only them."""
    tokens = TokenSet.parse("default-writer ns=default\n")
    client = await aiohttp_client(create_app(ServerConfig(auth_tokens=tokens)))
    headers = _headers("default-writer")
    assert (await client.put("/register_transfer_engine_info", json=_INFO, headers=headers)).status == 200
    assert (
        await client.put(f"{_NS}/register_transfer_engine_info", json=_INFO, headers=headers)
    ).status == 403


async def test_a_token_of_several_namespaces_writes_each(aiohttp_client):
    """ns=A,B covers both, and nothing else."""
    tokens = TokenSet.parse("two ns=team-a,team-b\n")
    client = await aiohttp_client(create_app(ServerConfig(auth_tokens=tokens)))
    for namespace, status in [("team-a", 200), ("team-b", 200), ("team-c", 403)]:
        reply = await client.put(
            f"/ns/{namespace}/register_transfer_engine_info", json=_INFO, headers=_headers("two")
        )
        assert reply.status == status


async def test_a_bad_namespace_is_the_400_not_a_403(aiohttp_client):
    """A scoped token asking for a name that is no namespace gets the handler's 400, not a 403 quoting it."""
    client = await aiohttp_client(create_app(ServerConfig(auth_tokens=TOKENS)))
    reply = await client.get("/ns/-bad-/ranks", headers=_headers("own-token-aaaa"))
    assert reply.status == 400
    assert "Invalid namespace" in (await reply.json())["detail"]


# -- Expect: 100-continue -----------------------------------------------


@pytest.mark.parametrize("reads", ["token", "open"])
@pytest.mark.parametrize(
    ("token", "status"),
    [(None, b"401"), ("reader-token-cccc", b"403"), ("other-token-bbbb", b"403"), ("own-token-aaaa", b"100")],
)
async def test_expect_continue_is_refused_before_the_body(aiohttp_client, reads, token, status):
    """A write sent with Expect: 100-continue gets its 401 or 403 at once; only a covered one is invited."""
    client = await aiohttp_client(create_app(ServerConfig(auth_tokens=TOKENS, auth_reads=reads)))
    reader, writer = await asyncio.open_connection(client.host, client.port)
    auth = "" if token is None else f"Authorization: Bearer {token}\r\n"
    writer.write(
        f"PUT {_NS}/register_transfer_engine_info HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        f"Content-Length: 10\r\n{auth}\r\n".encode()
    )
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
    assert head.split(b" ")[1] == status, head
    writer.close()


# -- the namespace listing: /metrics and /namespaces---------------------------------


def _listed(text: str) -> set[str]:
    """The namespaces /metrics shows series of."""
    return {
        line.split('namespace="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("aiobootstrap_version{")
    }


async def _three_namespaces(aiohttp_client: Any, reads: str) -> TestClient[web.Request, web.Application]:
    """A server with ``TOKENS`` and ``reads``, and rank 0 registered in default, team-a and team-b."""
    client: TestClient[web.Request, web.Application] = await aiohttp_client(
        create_app(ServerConfig(auth_tokens=TOKENS, auth_reads=reads))  # type: ignore[arg-type]
    )
    for namespace in ["default", "team-a", "team-b"]:
        path = f"/ns/{namespace}/register_transfer_engine_info"
        assert (await client.put(path, json=_INFO, headers=_headers(ALL))).status == 200
    return client


@pytest.mark.parametrize(
    ("reads", "token", "listed"),
    [
        ("token", "own-token-aaaa", {"team-a"}),
        ("token", "reader-token-cccc", {"default", "team-a", "team-b"}),
        ("token", ALL, {"default", "team-a", "team-b"}),
        ("open", None, {"default", "team-a", "team-b"}),
        ("open", "own-token-aaaa", {"default", "team-a", "team-b"}),
    ],
)
async def test_metrics_lists_the_namespaces_the_token_covers(aiohttp_client, reads, token, listed):
    """A team's token sees its own namespaces' series; with open reads everyone sees all (a token gets no less)."""
    client = await _three_namespaces(aiohttp_client, reads)
    reply = await client.get("/metrics", headers=_headers(token))
    assert reply.status == 200
    text = await reply.text()
    assert _listed(text) == listed
    assert f"aiobootstrap_namespaces {float(len(listed))}" in text


@pytest.mark.parametrize(
    ("reads", "token", "listed"),
    [
        ("token", "own-token-aaaa", ["team-a"]),
        ("token", "reader-token-cccc", ["default", "team-a", "team-b"]),
        ("open", None, ["default", "team-a", "team-b"]),
    ],
)
async def test_the_namespace_listing_shows_what_the_token_covers(aiohttp_client, reads, token, listed):
    """GET /namespaces names the namespaces the token covers, as /metrics does, with their figures."""
    client = await _three_namespaces(aiohttp_client, reads)
    reply = await client.get("/namespaces", headers=_headers(token))
    assert reply.status == 200
    shown = (await reply.json())["namespaces"]
    assert [each["namespace"] for each in shown] == listed
    assert all(each["ranks"] == 1 and each["version"] == 1 for each in shown)


# -- configuration --------------------------------------------------------


def test_open_reads_need_a_token():
    """--auth-reads open without any token would leave writes open too: refused."""
    with pytest.raises(ValueError, match="open reads"):
        ServerConfig(auth_reads="open")


def test_one_token_or_a_set_not_both():
    with pytest.raises(ValueError, match="not both"):
        ServerConfig(auth_token="one", auth_tokens=TOKENS)


def test_auth_reads_is_token_or_open():
    with pytest.raises(ValueError, match="token, open"):
        ServerConfig(auth_tokens=TOKENS, auth_reads="sometimes")  # type: ignore[arg-type]


def test_config_repr_shows_no_token():
    """A config with scoped tokens prints their count, never one of them."""
    shown = repr(ServerConfig(auth_tokens=TOKENS, auth_reads="open"))
    assert "4 tokens" in shown
    for token in WHO.values():
        assert token is None or token not in shown


# -- the clients, the hosts and rotation in Python ----------------------------


async def test_a_client_out_of_scope_raises_forbidden_at_once():
    """A BootstrapClient whose token may not write gets Forbidden with the server's detail, not retries."""
    async with BootstrapServer(port=0, auth_tokens=TOKENS, auth_reads="open") as server:
        async with BootstrapClient(server.url, token="reader-token-cccc", namespace=NAMESPACE) as reader:
            with pytest.raises(Forbidden, match="may only read"):
                await reader.register(1, session_id="s", weights_info_dict={}, timeout=GUARD)
        async with BootstrapClient(server.url, namespace=NAMESPACE) as engine:
            assert (await engine.list_ranks()).ranks == []  # an engine reads with no token at all


async def test_rotate_tokens_puts_a_new_set_in_force_at_once():
    """BootstrapServer.rotate_tokens: the removed token is refused from the next request, the new one works."""
    async with BootstrapServer(port=0, auth_tokens=TOKENS) as server:
        async with BootstrapClient(server.url, token=ALL) as client:
            await client.list_ranks()
            server.rotate_tokens(TokenSet.parse("fresh-token\n"))
            with pytest.raises(Unauthorized):
                await client.list_ranks()
        async with BootstrapClient(server.url, token="fresh-token") as client:
            await client.list_ranks()


async def test_rotate_tokens_without_tokens_is_an_error():
    async with BootstrapServer(port=0) as server:
        with pytest.raises(RuntimeError, match="without auth tokens"):
            server.rotate_tokens(TOKENS)


def test_the_threaded_server_and_the_sync_client_take_the_same_configuration():
    """ThreadedBootstrapServer takes auth_tokens and auth_reads, rotates from any thread; the sync client's token= is sent."""
    server = ThreadedBootstrapServer("127.0.0.1", 0, auth_tokens=TOKENS, auth_reads="open")
    try:
        with SyncBootstrapClient(server.url, token="own-token-aaaa", namespace=NAMESPACE) as writer:
            writer.register(0, session_id="threaded", weights_info_dict={})
        with SyncBootstrapClient(server.url, namespace=NAMESPACE) as engine:
            assert engine.get(0, timeout=GUARD).session_id == "threaded"
            with pytest.raises(Unauthorized):
                engine.register(1, session_id="s", weights_info_dict={}, timeout=GUARD)
        server.rotate_tokens(TokenSet.parse("other-team ns=team-b\n"))
        with (
            SyncBootstrapClient(server.url, token="own-token-aaaa", namespace=NAMESPACE) as writer,
            pytest.raises(Unauthorized),
        ):
            writer.register(0, session_id="rotated out", weights_info_dict={}, timeout=GUARD)
    finally:
        server.close()


# -- OpenAPI --------------------------------------------------------------


async def test_openapi_declares_the_403s_and_the_optional_token_of_open_reads(aiohttp_client):
    """From the same table: reads take no token or one with open reads; namespaced routes list 403 where it can come."""
    client = await aiohttp_client(create_app(ServerConfig(auth_tokens=TOKENS, auth_reads="open")))
    reply = await client.get("/openapi.json")
    assert reply.status == 200
    doc = await reply.json()
    assert doc == document(token=True, open_reads=True)
    ranks = doc["paths"]["/ns/{namespace}/ranks"]["get"]
    assert ranks["security"] == [{}, {"bearerAuth": []}]
    assert "403" not in ranks["responses"]
    register = doc["paths"]["/ns/{namespace}/register_transfer_engine_info"]["put"]
    assert register["security"] == [{"bearerAuth": []}]
    assert "403" in register["responses"]
    closed = document(token=True)
    assert "403" in closed["paths"]["/ranks"]["get"]["responses"]
    assert "403" not in closed["paths"]["/metrics"]["get"]["responses"]
    assert closed["paths"]["/ready"]["get"]["security"] == []
