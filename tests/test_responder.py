"""The one responder (``fastpath/responder.py``): every typed reply a face returns is, written as pre-built
bytes, aiohttp's own reply on the wire (the same status line, headers in the same order, and body, read
over a raw socket for each HTTP variant), including the replies that took aiohttp's way before the
responder (a text ``200`` other than ``OK``, a listing's and a batch's JSON, a ``form=object`` get, a
woken ``form=object`` get, a woken Mooncake get), and a face's route is served through it."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from urllib.parse import quote

import pytest
from aiohttp import web

import aiobootstrap.server.faces
from aiobootstrap._names import DEFAULT_ROLE
from aiobootstrap.server.face import Access, Route
from aiobootstrap.server.fastpath.eligible import ELIGIBILITY
from aiobootstrap.server.fastpath.gets import GET_REPLIES
from aiobootstrap.server.fastpath.replies import JsonReply, TextReply
from aiobootstrap.server.fastpath.responder import respond
from aiobootstrap.store import Key
from aiobootstrap.wire.metadata import METADATA, encode_value

from .helpers.raw_http import VARIANTS, Reply, _connect, _read_reply
from .helpers.registry import register_in
from .helpers.served_app import Served
from .helpers.served_app import fast as fast  # the module's fixtures, shared
from .helpers.served_app import plain as plain
from .helpers.served_app import served_config as served_config
from .helpers.waits import until

NAME = "mooncake/ram/127.0.0.1:53925"
METADATA_PATH = "/metadata?key=" + quote(NAME, safe="")
GET = "/get_transfer_engine_info"


async def _ask(
    served: Served, variant: tuple[str, str, str], path: str, method: str = "", body: bytes = b""
) -> Reply:
    get, version, extra = variant
    method = method or get
    reader, writer = await _connect(served)
    try:
        length = f"Content-Length: {len(body)}\r\n" if body or method in ("PUT", "POST") else ""
        writer.write(f"{method} {path} HTTP/{version}\r\nHost: test\r\n{extra}{length}\r\n".encode() + body)
        return await _read_reply(reader, head_only=method == "HEAD")
    finally:
        writer.close()


def _same_in_order(ours: Reply, theirs: Reply) -> None:
    """The same reply, its headers in the same order (``Date`` and the boot id differ per server)."""
    assert ours.status_line == theirs.status_line
    assert ours.body == theirs.body
    for header in ("Date", "X-Aiobootstrap-Boot"):
        assert ours.headers.pop(header)
        assert theirs.headers.pop(header)
    assert list(ours.headers.items()) == list(theirs.headers.items())


async def _both(
    fast: Served, plain: Served, name: str, path: str, method: str = "", body: bytes = b""
) -> Reply:
    assert fast.app[ELIGIBILITY].allowed
    assert not plain.app[ELIGIBILITY].allowed
    ours = await _ask(fast, VARIANTS[name], path, method, body)
    theirs = await _ask(plain, VARIANTS[name], path, method, body)
    _same_in_order(ours, theirs)
    return ours


async def _metadata(served: Served, value: bytes) -> None:
    await served.registry.register(
        Key.named("default", METADATA, DEFAULT_ROLE, NAME), encode_value(value), None
    )


GETS = list(VARIANTS)
WRITES = [name for name in VARIANTS if not name.startswith("HEAD")]


@pytest.mark.parametrize("name", WRITES)
async def test_a_text_200_other_than_ok_is_aiohttps(fast: Served, plain: Served, name: str) -> None:
    """``DELETE /metadata``'s ``metadata deleted`` (no version) and a ``PUT`` of the same value's
    ``metadata unchanged`` (a version): pre-built now, aiohttp's bytes."""
    rpc = "/metadata?key=" + quote("mooncake/rpc_meta/engine", safe="")
    for served in (fast, plain):
        await _metadata(served, b"{}")
        await _ask(served, VARIANTS["1.1 keep-alive"], rpc, "PUT", b'{"ip":"a"}')
    unchanged = await _both(fast, plain, name, rpc, "PUT", b'{"ip":"a"}')
    assert unchanged.body == b"metadata unchanged"
    assert unchanged.headers["X-Aiobootstrap-Version"] == "2"
    deleted = await _both(fast, plain, name, METADATA_PATH, "DELETE")
    assert deleted.body == b"metadata deleted"
    assert "X-Aiobootstrap-Version" not in deleted.headers


@pytest.mark.parametrize("name", GETS)
async def test_json_listings_and_batches_are_aiohttps(fast: Served, plain: Served, name: str) -> None:
    """A listing (``/mooncake``), a batch get, an empty encoder list (a version, 0) and a ``form=object``
    get: pre-built now, aiohttp's bytes."""
    for served in (fast, plain):
        await register_in(served.registry, 0, "s", {"w": [1, 2, 3]})
    listing = await _both(fast, plain, name, "/mooncake")
    batch = await _both(fast, plain, name, "/get_transfer_engine_info_batch?ranks=0")
    urls = await _both(fast, plain, name, "/list_encoder_urls")
    whole = await _both(fast, plain, name, f"{GET}?rank=0&form=object")
    if not name.startswith("HEAD"):
        assert json.loads(listing.body)["keys"] == 0
        assert json.loads(batch.body)["version"] == 1
        assert urls.headers["X-Aiobootstrap-Version"] == "0"
        assert json.loads(whole.body)["remote_instance_transfer_engine_info"]["session_id"] == "s"
    missing = await _both(fast, plain, name, f"{GET}?rank=1")
    assert missing.status_line.endswith("404 Not Found")


@pytest.mark.parametrize("name", GETS)
async def test_woken_object_and_metadata_gets_are_written_at_delivery(
    fast: Served, plain: Served, name: str
) -> None:
    """A ``form=object`` get and a Mooncake get parked with ``wait=``: the fast path writes them at the
    delivery (nothing of theirs is expected once written), the bytes aiohttp's."""
    method, version, extra = VARIANTS[name]
    paths = (f"{GET}?rank=3&form=object&wait=10", METADATA_PATH + "&wait=10")
    replies: dict[str, list[Reply]] = {}
    for served in (fast, plain):
        connections = [await _connect(served) for _ in paths]
        for (_, writer), path in zip(connections, paths, strict=True):
            writer.write(f"{method} {path} HTTP/{version}\r\nHost: test\r\n{extra}\r\n".encode())
        await until(lambda served=served: served.registry.parked == 2)  # type: ignore[misc]
        if served is fast:
            assert len(fast.app[GET_REPLIES]._expecting) == 2
        await register_in(served.registry, 3, "s", {"w": [1]})
        await _metadata(served, b'{"name":"x"}')
        replies[str(served.port)] = [
            await _read_reply(reader, head_only=method == "HEAD") for reader, _ in connections
        ]
        for _, writer in connections:
            writer.close()
    ours, theirs = replies[str(fast.port)], replies[str(plain.port)]
    for mine, aiohttps in zip(ours, theirs, strict=True):
        _same_in_order(mine, aiohttps)
    await until(lambda: not fast.app[GET_REPLIES]._expecting)


async def test_the_responder_returns_aiohttps_replies_as_they_are(fast: Served) -> None:
    """A ``web.StreamResponse`` a handler returns is the reply; a typed one is made into one."""
    request = _Request(fast.app)
    made = web.Response(text="as is")
    assert await respond(request, made) is made  # type: ignore[arg-type]
    text = await respond(request, TextReply("no", 400))  # type: ignore[arg-type]
    assert isinstance(text, web.Response)
    assert (text.status, text.text) == (400, "no")
    gone = await respond(request, JsonReply(b"{}", 410))  # type: ignore[arg-type]
    assert isinstance(gone, web.Response)
    assert (gone.status, gone.body) == (410, b"{}")


class _Request:
    def __init__(self, app: web.Application) -> None:
        self.app = app


async def test_a_face_route_is_served_through_the_responder() -> None:
    """``Route.definition`` wraps the handler once; the handler is still found behind it (``__wrapped__``)."""

    async def handler(request: web.Request) -> TextReply:
        return TextReply("OK")

    definition = Route("GET", "/x", handler, Access.READ).definition(None)
    assert definition.handler is not handler  # type: ignore[comparison-overlap]
    assert getattr(definition.handler, "__wrapped__", None) is handler


def test_no_face_imports_of_the_fast_path_but_the_responders_types() -> None:
    """A face says what it answers (``fastpath.replies``); nothing else of the fast path is a face's."""
    faces = Path(aiobootstrap.server.faces.__file__).parent
    found = []
    for path in sorted(faces.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or "fastpath" not in (module := node.module or ""):
                continue
            if module != "fastpath.replies" or node.level < 2:
                found.append(f"{path.relative_to(faces)}: {module}")
    assert found == []
