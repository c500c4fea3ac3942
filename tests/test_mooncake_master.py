"""Mooncake's store master as a caller of the metadata server (issue 40): since June 2026, with
``--enable_metadata_cleanup_on_timeout``, it sends ``DELETE /metadata?key=...`` for both keys of a client
whose heartbeat timed out (``mooncake/ram/<segment>`` and ``mooncake/rpc_meta/<segment>``) and reads the
answers of Mooncake's own server: ``200`` ``metadata deleted``, or ``404`` ``metadata not found`` for a key
already gone. It sends no token. Its embedded server answers ``GET /health`` with ``200`` ``OK``: so does
aiobootstrap's (the native face's route, served beside the Mooncake face)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.tokens import TokenSet

SEGMENT = "10.0.0.7:15868"
RPC_KEY, RAM_KEY = f"mooncake/rpc_meta/{SEGMENT}", f"mooncake/ram/{SEGMENT}"
DESCRIPTOR = b'{"name":"10.0.0.7:15868","buffers":[{"addr":1,"length":4096}],"protocol":"tcp"}'
ADDRESS = b'{"ip_or_host_name":"10.0.0.7","rpc_port":15868}'


def _path(key: str, *, escaped: bool = True, namespace: str = "") -> str:
    """``/metadata?key=...`` as an engine writes it (the key URL-escaped), or with the key as it is."""
    prefix = f"/ns/{namespace}" if namespace else ""
    return f"{prefix}/metadata?key={quote(key, safe='') if escaped else key}"


async def _text(reply: Any) -> tuple[int, str]:
    return reply.status, await reply.text()


async def _engine(client: Any, namespace: str = "") -> None:
    """An engine's start: its segment descriptor and its RPC address, as the transfer engine PUTs them."""
    for key, value in ((RAM_KEY, DESCRIPTOR), (RPC_KEY, ADDRESS)):
        put = await client.put(_path(key, namespace=namespace), data=value)
        assert await _text(put) == (200, "metadata updated")


@pytest.mark.parametrize("escaped", [True, False], ids=["key escaped", "key as it is"])
async def test_the_masters_cleanup_deletes_both_keys(client: Any, escaped: bool) -> None:
    """Both DELETEs are Mooncake's exact 200; both keys are gone (404 text), and an engine restarted under
    the same name takes its RPC entry again (no longer the 400 of a duplicate)."""
    await _engine(client)
    for key in (RPC_KEY, RAM_KEY):
        assert await _text(await client.delete(_path(key, escaped=escaped))) == (200, "metadata deleted")
    for key in (RPC_KEY, RAM_KEY):
        assert await _text(await client.get(_path(key))) == (404, "metadata not found")
    restarted = b'{"ip_or_host_name":"10.0.0.7","rpc_port":15990}'
    assert await _text(await client.put(_path(RPC_KEY), data=restarted)) == (200, "metadata updated")


async def test_a_key_already_gone_is_mooncakes_404(client: Any) -> None:
    """The engine's segment went first (its normal exit, or a probe): the master's DELETE of it is the 404
    text, and of the other key still the 200."""
    await _engine(client)
    assert (await client.delete(_path(RAM_KEY))).status == 200
    assert await _text(await client.delete(_path(RPC_KEY))) == (200, "metadata deleted")
    assert await _text(await client.delete(_path(RAM_KEY))) == (404, "metadata not found")
    assert await _text(await client.delete(_path("mooncake/ram/never-there"))) == (404, "metadata not found")


async def test_the_masters_deletes_need_no_token_in_an_open_namespace(aiohttp_client: Any) -> None:
    """The master, like the engines, sends no token: the token file's ``*`` line lets it delete in the
    namespaces it names; elsewhere it is refused and nothing goes."""
    tokens = TokenSet.parse("admin-secret\n*  ns=mooncake-0\n")
    guarded = await aiohttp_client(create_app(ServerConfig(auth_tokens=tokens)))
    await _engine(guarded, "mooncake-0")
    for key in (RPC_KEY, RAM_KEY):
        deleted = await guarded.delete(_path(key, namespace="mooncake-0"))
        assert await _text(deleted) == (200, "metadata deleted")
    assert (await guarded.delete(_path(RPC_KEY, namespace="team-b"))).status == 401


@pytest.mark.parametrize(
    "faces", [None, ("mooncake",), ("mooncake", "native")], ids=["every face", "mooncake", "mooncake,native"]
)
async def test_health_is_the_masters_200_ok(aiohttp_client: Any, faces: tuple[str, ...] | None) -> None:
    """GET /health on a Mooncake deployment: 200 text OK, as the master's embedded server answers, in every
    namespace, without a token (a probe)."""
    tokens = TokenSet.parse("admin-secret\n")
    server = await aiohttp_client(create_app(ServerConfig(faces=faces, auth_tokens=tokens)))
    for path in ("/health", "/ns/mooncake-0/health"):
        reply = await server.get(path)
        assert (reply.status, reply.content_type, await reply.text()) == (200, "text/plain", "OK")
