"""Schemathesis against the served OpenAPI document: the server keeps every promise it makes.

Schemathesis (a well-kept property-based API tester) reads ``/openapi.json``,
sends requests the document allows and requests it forbids to a real server,
and checks every reply against the document: no 5xx, a documented status, the
documented content type and body schema, forbidden input refused, allowed
input not refused, and, with a token, that no route but ``/health`` answers
without it. A route, parameter or reply that drifts from its description
fails here, with a ``curl`` line that reproduces it.

Bounded and deterministic: a fixed seed, derandomized generation and a few
dozen examples per operation and phase, against a server whose ``--max-wait``
is tiny (a ``wait=`` costs nothing).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
import requests
import schemathesis
from pytest_aiohttp import AiohttpClient

from aiobootstrap import create_app
from aiobootstrap._ranks import MAX_RANK
from aiobootstrap.server.openapi import RANKS_FORMAT, document
from aiobootstrap.wire.routes import OPENAPI_PATH

from .helpers.waits import GUARD

TOKEN = "schemathesis-token"
TOKEN_ENV = "AIOBOOTSTRAP_AUTH_TOKEN"
LISTENING = "aiobootstrap listening on "
_EXAMPLES = 8
"""Fuzzing examples per operation (the examples and coverage phases add their own, bounded ones)."""


_REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "415", "417", "422", "428", "429", "5xx"]
"""What schemathesis takes for a refusal of schema-violating input: its own list, and the 417 (above)."""


_WATCH = {
    # A schema-valid watch may be told 410: its after= (or boot=) is not in the history.
    "include-path-regex": "/watch$",
    "checks": {
        "positive_data_acceptance": {
            "expected-statuses": ["2xx", "3xx", "401", "403", "404", "409", "410", "429", "5xx"]
        }
    },
}


_ROUTE = {
    # A schema-valid prefill rank may be outside its own sizes (attn_tp_rank 3 of attn_tp_size 2), a
    # schema-valid query may mix -1 with ranks, and a schema-valid metadata key may not be text a store can
    # keep (a lone surrogate): what JSON Schema cannot say is a 400.
    "include-path-regex": "/(route|metadata)$",
    "checks": {
        "positive_data_acceptance": {
            "expected-statuses": ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]
        }
    },
}


_ROUTE_GET = {
    # decode's question is answered 503 until every prefill rank has registered: the engines' wire, which
    # their code reads. A 500 would still fail here: it is no documented status.
    "include-path-regex": "/route$",
    "include-method": "GET",
    "checks": {"not_a_server_error": {"enabled": False}},
}


def _config(*, coverage: bool, **extra: Any) -> schemathesis.Config:
    extra.setdefault("operations", [])
    extra["operations"] = [*extra["operations"], _WATCH, _ROUTE, _ROUTE_GET]
    return schemathesis.Config.from_dict(
        {
            "seed": 20261201,
            "generation": {"max-examples": _EXAMPLES, "deterministic": True},
            # A header the fuzzer adds may be an Expect this server cannot meet: every route refuses it with
            # its documented 417 before anything else (tests/test_auth.py), which is a refusal too.
            "checks": {"negative_data_rejection": {"expected-statuses": _REFUSALS}},
            "phases": {
                # Stateful sequences add little to a registry whose every route is independent.
                "stateful": {"enabled": False},
                # The coverage phase sends each parameter's boundaries and each way to break it
                # (about 50 requests per operation): once, on the server without a token.
                # Two methods a route does not take, rather than all eight: one dispatch decides them all.
                "coverage": {"enabled": coverage, "unexpected-methods": ["patch", "trace"]},
            },
            **extra,
        }
    )


def _rank_part() -> st.SearchStrategy[str]:
    first = st.one_of(st.integers(0, 300), st.integers(0, MAX_RANK - 64))
    return st.builds(
        lambda start, span: str(start) if span < 0 else f"{start}-{start + span}",
        first,
        st.integers(-1, 63),
    )


# What the pattern of ``ranks`` cannot say: a range's end is not below its start.
# At most 8 parts of at most 64 ranks: far below MAX_BATCH_RANKS.
schemathesis.openapi.format(RANKS_FORMAT, st.lists(_rank_part(), min_size=1, max_size=8).map(",".join))

open_schema = schemathesis.openapi.from_dict(
    document(),
    config=_config(
        coverage=True,
        operations=[
            # A /ns/{namespace} twin runs the same handler: its coverage cases would repeat its
            # twin's but for the namespace, which the twin of /health covers (fuzzing still runs).
            {
                "include-path-regex": "^/ns/",
                "exclude-path-regex": "/health$",
                "phases": {"coverage": {"enabled": False}},
            }
        ],
    ),
)
# Schemathesis sends the token itself, and leaves it out where it checks the refusal.
token_schema = schemathesis.openapi.from_dict(
    document(token=True),
    config=_config(
        coverage=False,
        auth={"openapi": {"bearerAuth": {"bearer": TOKEN}}},
    ),
)


def _integral_ranks(context: schemathesis.HookContext, body: Any) -> Any:
    """A JSON number with a zero fraction (``3.0``) is an integer to JSON Schema, but not a rank
    to the server (SPEC: an integer), and a schema cannot tell them apart: send ``3``."""
    if isinstance(body, dict):
        for name in ("rank", "tp_rank"):
            value = body.get(name)
            if isinstance(value, float) and value.is_integer():
                body = {**body, name: int(value)}
    return body


for _schema in (open_schema, token_schema):
    _schema.hook("map_body")(_integral_ranks)


@pytest.fixture(scope="module")
def http() -> Iterator[requests.Session]:
    """One connection pool for every case: a new connection per request would double the time."""
    with requests.Session() as session:
        yield session


class Served:
    """``python -m aiobootstrap`` in a process of its own: it does not share the tests' GIL."""

    def __init__(self, log: Path, *args: str, token: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        if token is not None:
            env[TOKEN_ENV] = token
        with log.open("w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "aiobootstrap", "--port", "0", "--log-level", "warning", *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith(LISTENING), (line, log.read_text())
        self.url = line.removeprefix(LISTENING).strip()
        self.log = log

    def stop(self) -> str:
        """Stop the server; what it logged."""
        self.process.send_signal(signal.SIGTERM)
        self.process.communicate(timeout=GUARD)
        return self.log.read_text()


@contextmanager
def served(log: Path, token: str | None = None) -> Iterator[Served]:
    # A tiny --max-wait: a generated wait= costs nothing.
    server = Served(log, "--max-wait", "0.01", token=token)
    try:
        yield server
    finally:
        logged = server.stop()
    assert "Traceback" not in logged, logged


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(tmp_path_factory.mktemp("open") / "server.log") as server:
        yield server


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(tmp_path_factory.mktemp("token") / "server.log", token=TOKEN) as server:
        yield server


def _served(url: str, **headers: str) -> Any:
    reply = requests.get(url + OPENAPI_PATH, headers=headers, timeout=10)
    assert reply.status_code == 200
    return reply.json()


def test_the_fuzzed_documents_are_the_served_ones(open_server: Served, token_server: Served) -> None:
    """What Schemathesis reads below is what each server serves at /openapi.json."""
    assert _served(open_server.url) == open_schema.raw_schema
    assert _served(token_server.url, Authorization=f"Bearer {TOKEN}") == token_schema.raw_schema


@open_schema.parametrize()
def test_server_without_token(
    case: schemathesis.Case[Any], open_server: Served, http: requests.Session
) -> None:
    """Every operation of a server without a token conforms to its document."""
    case.call_and_validate(base_url=open_server.url, session=http, timeout=10)


@token_schema.parametrize()
def test_server_with_token(
    case: schemathesis.Case[Any], token_server: Served, http: requests.Session
) -> None:
    """Every operation of a server with a token conforms to its document, and refuses without it."""
    case.call_and_validate(base_url=token_server.url, session=http, timeout=10)


# -- what Schemathesis found ----------------------------------------------


@pytest.mark.parametrize("session_id", [None, 5, [1], {"a": 1}])
async def test_tagged_info_with_a_session_id_not_a_string(
    aiohttp_client: AiohttpClient, session_id: object
) -> None:
    """Another backend's info is stored unchecked; a session_id that is not a string in it once made
    the register and the delete answer 500 (after the write) when they logged it."""
    client = await aiohttp_client(create_app())
    body = {"rank": 1, "transfer_engine_info": {"backend": "nixl", "session_id": session_id}}
    registered = await client.put("/register_transfer_engine_info", json=body)
    assert (registered.status, await registered.text()) == (200, "OK")
    listing = await (await client.get("/ranks")).json()
    assert listing["ranks"][0]["session_id"] == ""
    got = await (await client.get("/get_transfer_engine_info?rank=1")).json()
    assert got["remote_instance_transfer_engine_info"] == body["transfer_engine_info"]
    deleted = await client.delete("/register_transfer_engine_info?rank=1")
    assert deleted.status == 200
