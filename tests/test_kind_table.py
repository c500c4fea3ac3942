"""A face declares its kinds, figures and counts; the host shows them without naming it.

A toy face (no engine, no route) declares a kind of named records, what
``/metrics`` counts of them per kind and role, and a count of its own:
``/metrics``, ``/namespaces``, ``/watch?kind=`` and the OpenAPI document
follow from the declarations alone.
"""

from __future__ import annotations

import pytest
from pytest_aiohttp import AiohttpClient

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._names import DEFAULT_ROLE
from aiobootstrap.core.registry import Registry
from aiobootstrap.server.appkeys import KIND_TABLE, REGISTRY
from aiobootstrap.server.face import Face
from aiobootstrap.server.face_registry import installed_faces
from aiobootstrap.server.kind_spec import KindFigures, KindSpec, KindTable, NamespaceCount
from aiobootstrap.server.openapi import document
from aiobootstrap.store import Key, Record

from .helpers.metrics import Client, scrape, value

NOTE = "toy_note"
HIDDEN = "toy_hidden"


def _encode(record: Record) -> bytes:
    return b"note " + str(record.version).encode()


async def _notes(registry: Registry, namespace: str) -> int:
    return await registry.count(namespace, NOTE, DEFAULT_ROLE)


async def _figures(registry: Registry, namespace: str, config: ServerConfig) -> list[KindFigures]:
    return [KindFigures(NOTE, DEFAULT_ROLE, await _notes(registry, namespace), 3, 0.0)]


TOY = Face.of_routes(
    "toy",
    list,
    kinds=(KindSpec(NOTE, _encode), KindSpec(HIDDEN, _encode, listed=False)),
    figures=_figures,
    counts=(
        NamespaceCount(
            "toy_notes",
            _notes,
            description="Notes.",
            metric="aiobootstrap_toy_notes",
            help="Notes, by namespace.",
        ),
    ),
)


@pytest.fixture
async def toy(aiohttp_client: AiohttpClient) -> Client:
    client = await aiohttp_client(create_app(ServerConfig(), faces=[*installed_faces(), TOY]))
    registry = client.app[REGISTRY]
    await registry.register(Key.named("default", NOTE, DEFAULT_ROLE, "a"), {"text": "hi"})
    return client


async def test_metrics_show_a_faces_figures_and_its_gauge(toy: Client) -> None:
    samples = await scrape(toy)
    where = {"namespace": "default", "kind": NOTE, "role": DEFAULT_ROLE}
    assert value(samples, "aiobootstrap_toy_notes", namespace="default") == 1
    assert value(samples, "aiobootstrap_kind_registered_ranks", **where) == 1
    assert value(samples, "aiobootstrap_world_size", **where) == 3
    assert value(samples, "aiobootstrap_missing_ranks", **where) == 2


async def test_namespaces_show_a_faces_count(toy: Client) -> None:
    listing = await (await toy.get("/namespaces")).json()
    [namespace] = listing["namespaces"]
    assert namespace["toy_notes"] == 1
    assert namespace["ranks"] == 0
    assert namespace["encoder_urls"] == 0


async def test_a_listed_kind_is_a_watch_filter_and_an_unlisted_one_is_not(toy: Client) -> None:
    reply = await toy.get(f"/watch?after=0&kind={NOTE}")
    assert reply.status == 200
    assert [change["kind"] for change in (await reply.json())["changes"]] == [NOTE]
    assert (await toy.get(f"/watch?after=0&kind={HIDDEN}")).status == 400


async def test_the_kind_table_encodes_by_the_declaring_face(toy: Client) -> None:
    table = toy.app[KIND_TABLE]
    record = await toy.app[REGISTRY].get(Key.named("default", NOTE, DEFAULT_ROLE, "a"))
    assert record is not None
    assert table.encode(record) == b"note 1"
    with pytest.raises(ValueError, match="no form=object"):
        table.encode_object(record)
    assert NOTE in table.listed()
    assert HIDDEN not in table.listed()


def test_a_kind_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        KindTable([KindSpec(NOTE, _encode), KindSpec(NOTE, _encode)])
    with pytest.raises(ValueError, match="declared twice"):
        create_app(ServerConfig(), faces=[TOY, TOY])


def test_the_openapi_namespaces_schema_has_a_field_per_count() -> None:
    items = document([*installed_faces(), TOY])["components"]["schemas"]["Namespaces"]["properties"]
    fields = items["namespaces"]["items"]
    assert fields["properties"]["toy_notes"]["description"] == "Notes."
    assert {"ranks", "encoder_urls", "toy_notes"} <= set(fields["required"])


async def test_only_the_served_faces_count(aiohttp_client: AiohttpClient) -> None:
    """Served without the engine-info and encoder faces: their gauges are absent, /namespaces still lists
    every field (0), and Mooncake's keys are still a figure."""
    client = await aiohttp_client(create_app(ServerConfig(faces=("mooncake", "native"))))
    assert (await client.put("/metadata?key=mooncake/ram/a", data=b"{}")).status == 200
    text = await (await client.get("/metrics")).text()
    assert "aiobootstrap_registered_ranks" not in text
    assert "aiobootstrap_encoder_urls" not in text
    assert 'aiobootstrap_kind_registered_ranks{kind="metadata",namespace="default",role="target"} 1.0' in text
    listing = await (await client.get("/namespaces")).json()
    assert listing["namespaces"] == [
        {"namespace": "default", "version": 1, "ranks": 0, "waiters": 0, "encoder_urls": 0}
    ]
