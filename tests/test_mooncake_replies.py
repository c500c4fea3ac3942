"""A Mooncake ``GET /metadata`` answered with pre-built bytes (the gets' fast path) is aiohttp's own reply on
the wire: the same status line, headers and body, read over a raw socket, for each HTTP variant; and a
value's next version is served, not the cached bytes of the last. A ``PUT``'s ``metadata updated``
(pre-built too) is aiohttp's reply as well, naming the version it stored."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from aiobootstrap._names import DEFAULT_ROLE
from aiobootstrap.server.fastpath.eligible import ELIGIBILITY
from aiobootstrap.store import Key
from aiobootstrap.wire.metadata import METADATA, encode_value

from .helpers.raw_http import VARIANTS, Reply, _connect, _read_reply, _request, _same
from .helpers.served_app import Served
from .helpers.served_app import fast as fast  # the module's fixtures, shared
from .helpers.served_app import plain as plain
from .helpers.served_app import served_config as served_config

NAME = "mooncake/ram/127.0.0.1:53925"
PATH = "/metadata?key=" + quote(NAME, safe="")
DESCRIPTOR = b'{"name":"127.0.0.1:53925","buffers":[{"addr":1,"length":4096}],"protocol":"tcp"}'


async def _put(served: Served, value: bytes, namespace: str = "default") -> None:
    await served.registry.register(
        Key.named(namespace, METADATA, DEFAULT_ROLE, NAME), encode_value(value), None
    )


async def _get(served: Served, variant: tuple[str, str, str], path: str = PATH) -> Reply:
    method, version, extra = variant
    reader, writer = await _connect(served)
    try:
        writer.write(_request(path, method=method, version=version, extra=extra))
        return await _read_reply(reader, head_only=method == "HEAD")
    finally:
        writer.close()


@pytest.mark.parametrize("name", list(VARIANTS))
async def test_a_prebuilt_metadata_reply_is_what_aiohttp_sends(
    fast: Served, plain: Served, name: str
) -> None:
    assert fast.app[ELIGIBILITY].allowed
    assert not plain.app[ELIGIBILITY].allowed
    raw = bytes(range(256))  # not UTF-8: stored as base64, served as the bytes
    for served in (fast, plain):
        await _put(served, raw)
    ours, theirs = await _get(fast, VARIANTS[name]), await _get(plain, VARIANTS[name])
    assert ours.headers["Content-Type"] == "application/json"
    if VARIANTS[name][0] == "GET":
        assert ours.body == raw
    _same(ours, theirs)


async def test_the_next_version_is_served_and_namespaces_apart(fast: Served) -> None:
    await _put(fast, DESCRIPTOR)
    first = await _get(fast, VARIANTS["1.1 keep-alive"])
    await _put(fast, DESCRIPTOR + b" ")
    second = await _get(fast, VARIANTS["1.1 keep-alive"])
    assert (first.body, first.headers["X-Aiobootstrap-Version"]) == (DESCRIPTOR, "1")
    assert (second.body, second.headers["X-Aiobootstrap-Version"]) == (DESCRIPTOR + b" ", "2")
    await _put(fast, b"{}", namespace="other")
    other = await _get(fast, VARIANTS["1.1 keep-alive"], "/ns/other" + PATH)
    again = await _get(fast, VARIANTS["1.1 keep-alive"])
    assert (other.body, again.body) == (b"{}", DESCRIPTOR + b" ")


async def _put_over_http(served: Served, variant: tuple[str, str, str], body: bytes) -> Reply:
    _, version, extra = variant
    reader, writer = await _connect(served)
    try:
        head = f"PUT {PATH} HTTP/{version}\r\nHost: test\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)
        return await _read_reply(reader)
    finally:
        writer.close()


@pytest.mark.parametrize("name", [name for name in VARIANTS if not name.startswith("HEAD")])
async def test_a_prebuilt_put_reply_is_what_aiohttp_sends(fast: Served, plain: Served, name: str) -> None:
    replies = []
    for served in (fast, plain):
        await _put(served, b"{}")  # the PUT below stores version 2 on both
        replies.append(await _put_over_http(served, VARIANTS[name], DESCRIPTOR))
    ours, theirs = replies
    assert (ours.body, ours.headers["X-Aiobootstrap-Version"]) == (b"metadata updated", "2")
    _same(ours, theirs)
    again = await _get(fast, VARIANTS["1.1 keep-alive"])
    assert (again.body, again.headers["X-Aiobootstrap-Version"]) == (DESCRIPTOR, "2")
