"""A prefill rank's ``GET /route`` and decode's parallel info (all four ``-1``) answered with pre-built bytes
(the gets' fast path) are aiohttp's own reply on the wire, for each HTTP variant; the rank's next registration
and the next deployment's topology are served, not the bytes of the last."""

from __future__ import annotations

import json

import pytest

from .helpers.prefill import ALL, rank_body, route
from .helpers.raw_http import VARIANTS, Reply, _connect, _read_reply, _request, _same
from .helpers.served_app import Served
from .helpers.served_app import fast as fast  # the module's fixtures, shared
from .helpers.served_app import plain as plain
from .helpers.served_app import served_config as served_config

ONE = "/route?" + route(1, 0, 1, 0)
PARALLEL_INFO = "/route?" + ALL


async def _send(served: Served, raw: bytes, *, head_only: bool = False) -> Reply:
    reader, writer = await _connect(served)
    try:
        writer.write(raw)
        return await _read_reply(reader, head_only=head_only)
    finally:
        writer.close()


async def _register_all(served: Served, port: int = 17000) -> None:
    """The four ranks of a 2 dp x 2 tp deployment, rank (dp 1, tp 1) at ``port``."""
    for dp in (0, 1):
        for tp in (0, 1):
            body = json.dumps(rank_body(tp, dp) | {"rank_port": port}).encode()
            head = f"PUT /route HTTP/1.1\r\nHost: test\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            assert (await _send(served, head + body)).body == b"OK"


@pytest.mark.parametrize("name", list(VARIANTS))
async def test_a_prebuilt_rank_address_is_what_aiohttp_sends(fast: Served, plain: Served, name: str) -> None:
    method, version, extra = VARIANTS[name]
    for served in (fast, plain):
        await _register_all(served)
    request = _request(ONE, method=method, version=version, extra=extra)
    ours = await _send(fast, request, head_only=method == "HEAD")
    theirs = await _send(plain, request, head_only=method == "HEAD")
    if method == "GET":
        assert json.loads(ours.body)["rank_port"] == 17000
    _same(ours, theirs)


async def test_the_next_registration_is_served(fast: Served) -> None:
    await _register_all(fast)
    first = await _send(fast, _request(ONE))
    await _register_all(fast, port=17001)
    second = await _send(fast, _request(ONE))
    assert json.loads(first.body)["rank_port"] == 17000
    assert json.loads(second.body)["rank_port"] == 17001
    assert int(second.headers["X-Aiobootstrap-Version"]) > int(first.headers["X-Aiobootstrap-Version"])


@pytest.mark.parametrize("name", list(VARIANTS))
async def test_the_prebuilt_parallel_info_is_what_aiohttp_sends(
    fast: Served, plain: Served, name: str
) -> None:
    method, version, extra = VARIANTS[name]
    for served in (fast, plain):
        await _register_all(served)
    request = _request(PARALLEL_INFO, method=method, version=version, extra=extra)
    for _ in range(2):  # the second from the reply made for the first
        ours = await _send(fast, request, head_only=method == "HEAD")
        theirs = await _send(plain, request, head_only=method == "HEAD")
        if method == "GET":
            assert json.loads(ours.body)["attn_tp_size"] == 2
        _same(ours, theirs)


async def test_the_next_deployments_parallel_info_is_served(fast: Served) -> None:
    """A deployment deleted and registered again with another topology: its parallel info, not the last's."""
    await _register_all(fast)
    first = await _send(fast, _request(PARALLEL_INFO))
    assert (await _send(fast, _request(PARALLEL_INFO, method="DELETE"))).body == b"OK"
    body = json.dumps(rank_body(0, 0, tp_size=1, dp_size=1)).encode()
    head = f"PUT /route HTTP/1.1\r\nHost: test\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    assert (await _send(fast, head + body)).body == b"OK"
    second = await _send(fast, _request(PARALLEL_INFO))
    assert (json.loads(first.body)["attn_tp_size"], json.loads(first.body)["dp_size"]) == (2, 2)
    assert (json.loads(second.body)["attn_tp_size"], json.loads(second.body)["dp_size"]) == (1, 1)
