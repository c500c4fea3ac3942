"""The bad-input battery: whatever a client sends, a clear 4xx (never a 5xx), and a 4xx changes nothing.

Property-based (hypothesis) bodies, query strings and headers against the
real app, then thousands of abandoned waits that must leave nothing behind.
"""

from __future__ import annotations

import asyncio
import gc
import gzip
import json
import string
import tracemalloc
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from yarl import URL

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.core.registry import Registry
from aiobootstrap.server.app import REGISTRY
from aiobootstrap.server.server import runner_options

from .helpers.waits import until

REGISTER = "/register_transfer_engine_info"
ROUTES = [
    ("GET", "/health"),
    ("PUT", REGISTER),
    ("DELETE", REGISTER),
    ("GET", "/get_transfer_engine_info"),
    ("GET", "/get_transfer_engine_info_batch"),
    ("GET", "/ranks"),
    ("PUT", "/ns/t/register_transfer_engine_info"),
    ("DELETE", "/ns/t/register_transfer_engine_info"),
    ("GET", "/ns/t/get_transfer_engine_info"),
    ("GET", "/ns/t/get_transfer_engine_info_batch"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
]
SEEDED = (0, 1, 5)
battery = settings(
    max_examples=150,
    deadline=None,
    # One app serves every example: what it stores is what each example must not change.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


async def serve(aiohttp_client, config: ServerConfig):
    """A test client for the app run with the connection options BootstrapServer uses."""
    server = TestServer(create_app(config))
    # aiohttp_client's server_kwargs never reach the runner: start it ourselves.
    await server.start_server(**runner_options(config))
    return await aiohttp_client(server)


@pytest.fixture
async def client(aiohttp_client):
    # A tiny --max-wait keeps a generated wait from holding the battery up,
    # while still going through the waiting code.
    config = ServerConfig(world_size=64, max_wait=0.005, max_body_size=64 * 1024, body_timeout=5.0)
    client = await serve(aiohttp_client, config)
    for rank in SEEDED:
        body = {"rank": rank, "transfer_engine_info": {"session_id": f"s{rank}", "weights_info_dict": {}}}
        assert (await client.put(REGISTER, json=body)).status == 200
    return client


async def _stored(client) -> Any:
    """What the server holds, as clients can see it."""
    listings = [await (await client.get(f"{prefix}/ranks")).json() for prefix in ("", "/ns/t")]
    for listing in listings:
        for item in listing["ranks"]:
            del item["age"]
    gets = [await (await client.get(f"/get_transfer_engine_info?rank={r}")).read() for r in SEEDED]
    return listings, gets


async def _check(client, method: str, url: URL | str, **kwargs: Any) -> int:
    """Send one request; a 5xx fails, a 4xx must be a one-sentence JSON detail and change nothing."""
    before = await _stored(client)
    response = await client.request(method, url, **kwargs)
    body = await response.read()
    assert response.status < 500, body
    if response.status >= 400:
        assert response.content_type == "application/json", body
        detail = json.loads(body)["detail"]
        assert isinstance(detail, str)
        assert detail
        assert "\n" not in detail
        assert len(detail) < 300
        assert "Traceback" not in detail
        assert await _stored(client) == before
    return int(response.status)


# -- bodies -------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
ranks = st.one_of(
    st.integers(min_value=-3, max_value=70),
    st.integers(),
    st.booleans(),
    st.floats(),
    st.text(max_size=4),
    st.none(),
)
near_valid = st.fixed_dictionaries(
    {},
    optional={
        "rank": ranks,
        "tp_rank": ranks,
        "transfer_engine_info": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {},
                optional={"session_id": json_values, "weights_info_dict": json_values},
            ),
        ),
    },
)


def _encode(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(_encode),
    near_valid.map(_encode),
    # JSON nested deeper than the parser's recursion limit.
    st.integers(min_value=900, max_value=5000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.just(b'{"rank": NaN}'),
    st.just(b'{"rank": 1e999}'),
)


@battery
@given(
    body=bodies, content_type=st.sampled_from(["application/json", "text/plain", "", "x/y; charset=bogus"])
)
async def test_register_bodies(client, body, content_type):
    """Any register body: 200 for a valid registration, else a 4xx that stores nothing."""
    headers = {"Content-Type": content_type} if content_type else {}
    await _check(client, "PUT", REGISTER, data=body, headers=headers)


# -- query strings ------------------------------------------------------

PARAMS = ["rank", "ranks", "wait", "after", "tp_rank", "x", ""]
values = st.one_of(
    st.sampled_from(
        [
            "",
            "0",
            "1",
            "5",
            "63",
            "64",
            "-1",
            "+1",
            " 1",
            "1 ",
            "01",
            "1.0",
            "1e3",
            "0x10",
            "1_0",
            "٣",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "1e309",
            "-0",
            "0.0001",
            "300",
            "99999999999999999999",
            "0-3",
            "3-0",
            "0-63",
            "0-64",
            "0-",
            "-3",
            "0--1",
            "0-1048576",
            "0,,1",
            ",",
            "0,5,1-2",
            "true",
            "null",
            "%",
            "%zz",
            "%00",
            "\x00",
            "\ud800",
        ]
    ),
    st.text(max_size=12),
    st.integers().map(str),
    st.floats().map(str),
)
queries = st.one_of(
    st.lists(st.tuples(st.sampled_from(PARAMS), values), max_size=4).map(
        lambda pairs: "&".join(
            f"{quote(k, safe='')}={quote(v, safe='-,', errors='surrogatepass')}" for k, v in pairs
        )
    ),
    # Raw, possibly malformed, query text: stray %, &, =, ;, #-free.
    st.text(alphabet=string.ascii_letters + string.digits + "%&=;-,.+_~!*'()", max_size=40),
)


@battery
@given(route=st.sampled_from(ROUTES), query=queries)
async def test_query_strings(client, route, query):
    """Any query string on any route: never a 5xx; a 4xx is a JSON detail and changes nothing."""
    method, path = route
    await _check(client, method, URL(f"{path}?{query}", encoded=True))


# -- headers ------------------------------------------------------------

TOKEN_CHARS = string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~"
header_names = st.one_of(
    st.sampled_from(
        [
            "Content-Type",
            "Content-Encoding",
            "Authorization",
            "Expect",
            "Accept",
            "Accept-Encoding",
            "Range",
            "If-None-Match",
            "If-Modified-Since",
            "Cookie",
            "Origin",
            "X-Forwarded-For",
            "Forwarded",
            "Upgrade",
            "Connection",
            "Transfer-Encoding",
            "TE",
            "Trailer",
            "Via",
            "X-Aiobootstrap-Boot",
        ]
    ),
    st.text(alphabet=TOKEN_CHARS, min_size=1, max_size=20),
)
# Visible ASCII, spaces and tabs, and Latin-1: what a header value may carry on the wire.
header_values = st.text(
    alphabet=st.characters(codec="latin-1", exclude_characters="\r\n\x00", exclude_categories=["Cc"])
    | st.just("\t"),
    max_size=40,
)
BODY = json.dumps({"rank": 2, "transfer_engine_info": {"session_id": "h", "weights_info_dict": {}}}).encode()


@battery
@given(
    route=st.sampled_from(ROUTES),
    headers=st.dictionaries(header_names, header_values, max_size=4),
    query=st.sampled_from(["rank=2", "ranks=0-2", "rank=1&wait=0.001"]),
)
async def test_headers(client, route, headers, query):
    """Any extra headers on a valid request: never a 5xx; a 4xx is a JSON detail and changes nothing."""
    method, path = route
    # Framing headers the client library computes itself would only test the client.
    headers = {
        k: v for k, v in headers.items() if k.lower() not in {"content-length", "host", "transfer-encoding"}
    }
    data = BODY if method == "PUT" else None
    try:
        await _check(client, method, f"{path}?{query}", data=data, headers=headers)
    except ValueError as exc:  # aiohttp's client refusing to send the header at all
        pytest.skip(f"client-side refusal: {exc}")


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd", "x-unknown"])
async def test_a_compressed_body_is_415(client, encoding):
    """A register body with a Content-Encoding is a JSON 415, decodable or not, never a 5xx."""
    body = gzip.compress(BODY) if encoding == "gzip" else b'{"rank": 1}'
    status = await _check(client, "PUT", REGISTER, data=body, headers={"Content-Encoding": encoding})
    assert status == 415


# -- abandoned waits ----------------------------------------------------

ABANDONED = 1_000
WAVE = 250
"""A small run of ``python -m bench.abandoned`` (10,000 waits, part of ``make bench``)."""


async def _abandon_wave(client, registry: Registry, first: int) -> None:
    """Park WAVE raw-socket waits (single and batch, some on one rank), then hang up on all of them."""
    writers = []
    for index in range(first, first + WAVE):
        if index % 3 == 0:
            target = f"/get_transfer_engine_info_batch?ranks={index % 40}-{index % 40 + 3}&wait=60"
        else:
            target = (
                f"/get_transfer_engine_info?rank={100 + index % 7 if index % 2 else 1000 + index}&wait=60"
            )
        _, writer = await asyncio.open_connection("127.0.0.1", client.port)
        writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        writers.append(writer)
    await until(lambda: registry.parked == WAVE)
    for writer in writers:
        writer.close()
    await until(lambda: registry.parked == 0 and registry.waiting_keys == 0)
    for writer in writers:
        await writer.wait_closed()
    # The server drops its side of each connection a few turns of the loop later.
    connections = client.server.runner.server
    await until(lambda: not connections.connections)


async def test_abandoned_waits_leave_nothing_behind(aiohttp_client):
    """Waits started and dropped leave no parked waiter, no waitlist, and no memory growth."""
    config = ServerConfig(max_wait=300.0)
    client = await serve(aiohttp_client, config)
    registry = client.app[REGISTRY]
    await _abandon_wave(client, registry, 0)  # warm up caches and pools before measuring
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for first in range(WAVE, ABANDONED, WAVE):
            await _abandon_wave(client, registry, first)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert registry.parked == 0
    assert registry.waiting_keys == 0
    # A leak of a few hundred bytes per abandoned wait would show; bench.abandoned finds smaller ones.
    assert grown < 512 * 1024, f"memory grew by {grown} bytes over {ABANDONED} abandoned waits"
    assert (await client.get("/health")).status == 200
