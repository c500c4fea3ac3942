"""GET /openapi.json describes every route the app serves, and nothing it does not."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from pytest_aiohttp import AiohttpClient

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._ranks import MAX_RANK, rank_value
from aiobootstrap.server.faces.engine_info import kinds as _kinds
from aiobootstrap.server.openapi import document
from aiobootstrap.wire.routes import MAX_BATCH_RANKS

_METHODS = {"get", "put", "post", "delete", "patch"}


def served_operations() -> set[tuple[str, str]]:
    """(method, path template) of every route the app answers; HEAD comes with GET for free."""
    app = create_app()
    return {
        (route.method.lower(), route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }


def described_operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method, path) for path, item in doc["paths"].items() for method in item if method in _METHODS}


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if "$ref" in node else []
        return found + [ref for value in node.values() for ref in refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in refs(value)]
    return []


async def test_openapi_json_is_served(aiohttp_client: AiohttpClient) -> None:
    """The route answers the document as JSON, OpenAPI 3.1, with the package version."""
    client = await aiohttp_client(create_app())
    reply = await client.get("/openapi.json")
    assert reply.status == 200
    assert reply.content_type == "application/json"
    doc = await reply.json()
    assert doc["openapi"] == "3.1.0"
    assert doc == document(token=False)


def test_every_served_route_is_described() -> None:
    """A route added to the app without a description here fails this test, by name."""
    undescribed = served_operations() - described_operations(document())
    assert not undescribed, (
        f"describe these routes in aiobootstrap/server/openapi/paths.py: {sorted(undescribed)}"
    )


def test_every_described_route_is_served() -> None:
    """The document promises no route the app does not answer."""
    unserved = described_operations(document()) - served_operations()
    assert not unserved, f"the app does not serve: {sorted(unserved)}"


def test_operations_are_complete() -> None:
    """Each operation has a unique id, a summary, its path parameters, and JSON error replies."""
    doc = document()
    ids: list[str] = []
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            ids.append(operation["operationId"])
            assert operation["summary"], (method, path)
            assert "200" in operation["responses"], (method, path)
            in_path = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert in_path == set(re.findall(r"{(\w+)}", path)), (method, path)
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    content = response["content"]
                    if "application/json" not in content:
                        # The engines' own sentences their code reads: the prefill bootstrap's and Mooncake's.
                        assert path.endswith(("/route", "/metadata")), (method, path, status)
                        assert list(content) == ["text/plain"], (method, path, status)
                        continue
                    schema = content["application/json"]["schema"]["$ref"]
                    assert schema in ("#/components/schemas/Error", "#/components/schemas/Missing")
    assert len(ids) == len(set(ids))


def test_every_schema_reference_resolves() -> None:
    """No $ref points at a schema the document does not define."""
    doc = document()
    for ref in refs(doc["paths"]) + refs(doc["components"]):
        assert ref.removeprefix("#/components/schemas/") in doc["components"]["schemas"], ref


async def test_openapi_json_with_a_token(aiohttp_client: AiohttpClient) -> None:
    """With a token, /openapi.json is refused without it, and the served document declares the
    bearer scheme on every operation but the probes /health and /ready, each with its 401."""
    client = await aiohttp_client(create_app(ServerConfig(auth_token="secret")))
    refused = await client.get("/openapi.json")
    assert refused.status == 401
    reply = await client.get("/openapi.json", headers={"Authorization": "Bearer secret"})
    doc = await reply.json()
    assert doc == document(token=True)
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": doc["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    for path, item in doc["paths"].items():
        for operation in item.values():
            if path.endswith("/health") or path == "/ready":
                assert operation["security"] == [], path
                assert "401" not in operation["responses"], path
            else:
                assert operation["security"] == [{"bearerAuth": []}], path
                assert "401" in operation["responses"], path


def test_without_a_token_no_route_answers_401() -> None:
    """A server without a token never sends 401, so its document promises none."""
    for path, item in document()["paths"].items():
        for method, operation in item.items():
            assert "401" not in operation["responses"], (method, path)
            assert operation.get("security", []) == [], (method, path)


def test_limits_come_from_the_protocol() -> None:
    """Every integer query parameter stops where the server's parser stops; the batch cap is named."""
    doc = document()
    parameters = [
        parameter
        for item in doc["paths"].values()
        for operation in item.values()
        for parameter in operation.get("parameters", [])
    ]
    integers = [p for p in parameters if p["schema"].get("type") == "integer"]
    assert {p["name"] for p in integers} == {"rank", "after", "waits", "findings"}
    assert all(p["schema"]["maximum"] == MAX_RANK for p in integers)
    assert rank_value(str(MAX_RANK)) == MAX_RANK
    assert rank_value(str(MAX_RANK + 1)) is None
    ranks = next(p for p in parameters if p["name"] == "ranks")
    assert str(MAX_BATCH_RANKS) in ranks["description"]
    pattern = re.compile(ranks["schema"]["pattern"])
    for good in ("0", "0-7,12", f" 3 , {MAX_RANK}", f"0-{MAX_RANK}"):
        assert pattern.search(good), good
    for bad in ("", ",", "0-", "-1", "1,,2", f"{MAX_RANK}0", "0 - 3", "a"):
        assert not pattern.search(bad), bad


def test_rank_or_tp_rank_is_required() -> None:
    """A registration needs rank or tp_rank; tp_rank is read only without rank."""
    for kind in _kinds.KINDS:
        body = document()["components"]["schemas"][f"{kind.title}Registration"]
        assert body["anyOf"] == [
            {"required": ["rank"]},
            {"required": ["tp_rank"], "properties": {"tp_rank": body["properties"]["rank"]}},
        ]
        assert "type" not in body["properties"]["tp_rank"]


async def test_health_in_an_invalid_namespace_is_a_400(aiohttp_client: AiohttpClient) -> None:
    """/ns/<not a namespace>/health is refused like every other route there, as the document says."""
    client = await aiohttp_client(create_app())
    reply = await client.get("/ns/%C2%84/health")
    assert reply.status == 400
    assert "namespace" in (await reply.json())["detail"]
    assert (await client.get("/ns/a.b-c_d/health")).status == 200


async def test_every_body_route_documents_what_reading_a_body_answers(aiohttp_client: AiohttpClient) -> None:
    """A compressed body is a 415 on every route that reads one, and each documents 408, 413 and 415."""
    # As the real server runs: bodies reach the handler as sent (no decoding in aiohttp's parser).
    # aiohttp_client's server_kwargs never reach the runner: start it here.
    server = TestServer(create_app())
    await server.start_server(auto_decompress=False)
    client: TestClient[web.Request, None] = await aiohttp_client(server)
    doc = document()
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if "requestBody" not in operation:
                continue
            # Mooncake's routes name their key first: without it, the key's 400 comes before the body.
            url = path.replace("{namespace}", "ns1") + ("?key=k" if path.endswith("/metadata") else "")
            compressed = await client.request(method, url, data=b"{}", headers={"Content-Encoding": "gzip"})
            assert compressed.status == 415, (method, path)
            assert {"408", "413", "415"} <= operation["responses"].keys(), (method, path)


async def test_every_operation_documents_the_417_every_route_answers(aiohttp_client: AiohttpClient) -> None:
    """An Expect header other than 100-continue is a JSON 417 on any route, before its handler: the document
    says so for each operation (schemathesis sends such headers, and an undocumented status fails it)."""
    operations = [op for item in document()["paths"].values() for op in item.values()]
    assert operations
    assert all("417" in operation["responses"] for operation in operations)
    client = await aiohttp_client(create_app())
    for method, route in (("GET", "/health"), ("PUT", "/route"), ("GET", "/metadata?key=k")):
        reply = await client.request(method, route, headers={"Expect": "=Z>"}, data=b"{}")
        assert reply.status == 417
        assert (await reply.json())["detail"].startswith("The only expectation this server meets")
