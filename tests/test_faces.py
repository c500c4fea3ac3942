"""A face is one declared unit: a toy face, declared here and nowhere in the package, is served.

``create_app(faces=...)`` takes it beside the installed faces: its route
is routed (under ``/ns/{namespace}/`` too), guarded by the ``Access`` it
declares, described in ``/openapi.json``, and its start-up and cleanup run
with the app's, though no module of the package names it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.face import Access, ExpectHandler, Face
from aiobootstrap.server.face_registry import installed_faces
from aiobootstrap.server.openapi import document
from aiobootstrap.server.openapi.paths import json_reply
from aiobootstrap.server.tokens import TokenSet

TOKENS = TokenSet.parse("own-token-aaaa ns=team-a\nall-token-dddd\n")
_STEPS = web.AppKey("toy_steps", list)


async def _echo(request: web.Request) -> web.Response:
    return web.json_response({"namespace": request.match_info.get("namespace", "default")})


def _routes(expect: ExpectHandler | None) -> list[web.RouteDef]:
    return [web.get("/echo", _echo, expect_handler=expect)]


def _paths() -> dict[str, dict[str, Any]]:
    reply = json_reply("The namespace asked.", "Echo")
    return {
        "/echo": {
            "get": {"operationId": "echo", "summary": "Say the namespace.", "responses": {"200": reply}}
        }
    }


async def _context(app: web.Application) -> AsyncIterator[None]:
    app[_STEPS] = steps = ["started"]
    yield
    steps.append("stopped")


TOY = Face(
    "toy",
    _routes,
    lambda: {("GET", "/echo"): Access.READ},
    _paths,
    lambda: {"Echo": {"type": "object", "properties": {"namespace": {"type": "string"}}}},
    contexts=(_context,),
)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_new_face_is_routed_in_every_namespace_and_started(aiohttp_client: Any) -> None:
    """Its route and its twin answer, its context runs; the server's own app does not know it."""
    client = await aiohttp_client(create_app(faces=(*installed_faces(), TOY)))
    assert client.app[_STEPS] == ["started"]
    assert await (await client.get("/echo")).json() == {"namespace": "default"}
    assert await (await client.get("/ns/team-a/echo")).json() == {"namespace": "team-a"}
    assert (await client.get("/ranks")).status == 200  # the server's faces are served beside it
    steps = client.app[_STEPS]
    await client.close()
    assert steps == ["started", "stopped"]
    plain = await aiohttp_client(create_app())
    assert (await plain.get("/echo")).status == 404


@pytest.mark.parametrize(
    ("path", "token", "status"),
    [
        ("/ns/team-a/echo", None, 401),
        ("/ns/team-a/echo", "wrong-token", 401),
        ("/ns/team-b/echo", "own-token-aaaa", 403),
        ("/echo", "own-token-aaaa", 403),
        ("/ns/team-a/echo", "own-token-aaaa", 200),
        ("/echo", "all-token-dddd", 200),
    ],
)
async def test_a_new_face_is_guarded_by_the_access_it_declares(
    aiohttp_client: Any, path: str, token: str | None, status: int
) -> None:
    """A read: a token is needed, and one scoped to another namespace is refused."""
    client = await aiohttp_client(
        create_app(ServerConfig(auth_tokens=TOKENS), faces=(*installed_faces(), TOY))
    )
    reply = await client.get(path, headers=None if token is None else _bearer(token))
    assert reply.status == status


async def test_a_new_face_is_described_beside_the_others(aiohttp_client: Any) -> None:
    """``/openapi.json`` describes its path, its twin and its schema, secured as a read; the rest is the
    server's own description, unchanged."""
    client = await aiohttp_client(
        create_app(ServerConfig(auth_tokens=TOKENS), faces=(*installed_faces(), TOY))
    )
    doc = await (await client.get("/openapi.json", headers=_bearer("all-token-dddd"))).json()
    echo, twin = doc["paths"].pop("/echo")["get"], doc["paths"].pop("/ns/{namespace}/echo")["get"]
    assert (echo["operationId"], twin["operationId"]) == ("echo", "echoInNamespace")
    assert twin["parameters"][0]["name"] == "namespace"
    for operation in (echo, twin):
        assert operation["security"] == [{"bearerAuth": []}]
        assert {"200", "401", "403"} <= set(operation["responses"])
    assert doc["components"]["schemas"].pop("Echo")["properties"] == {"namespace": {"type": "string"}}
    assert doc == document(token=True)


def test_a_route_two_faces_declare_stops_the_app() -> None:
    """A face that claims a route another face declares is refused when the app is made."""
    ranks = Face("ranks", lambda expect: [], lambda: {("GET", "/ranks"): Access.READ})
    with pytest.raises(ValueError, match="GET /ranks is declared twice"):
        create_app(faces=(*installed_faces(), ranks))
