"""GET /openapi.json describes every route the app serves, and nothing it does not."""

from __future__ import annotations

import re
from typing import Any

from pytest_aiohttp import AiohttpClient

from aiobootstrap import create_app
from aiobootstrap._openapi import document

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
    assert doc == document()


def test_every_served_route_is_described() -> None:
    """A route added to the app without a description here fails this test, by name."""
    undescribed = served_operations() - described_operations(document())
    assert not undescribed, f"describe these routes in aiobootstrap/_openapi.py: {sorted(undescribed)}"


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
                    schema = response["content"]["application/json"]["schema"]["$ref"]
                    assert schema in ("#/components/schemas/Error", "#/components/schemas/Missing")
    assert len(ids) == len(set(ids))


def test_every_schema_reference_resolves() -> None:
    """No $ref points at a schema the document does not define."""
    doc = document()
    for ref in refs(doc["paths"]) + refs(doc["components"]):
        assert ref.removeprefix("#/components/schemas/") in doc["components"]["schemas"], ref
