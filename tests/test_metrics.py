"""GET /metrics: the Prometheus text format, read back with Prometheus' own parser."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families
from pytest_aiohttp import AiohttpClient

from aiobootstrap import create_app
from aiobootstrap.server.app import REGISTRY

from .helpers.metrics import Samples, register, scrape, value

GUARD = 10.0


async def until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(GUARD):
        # The registry's counters offer no event to await: yield until they say so.
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0)


def labelled(samples: Samples, name: str, label: str) -> set[str]:
    return {dict(labels)[label] for sample_name, labels in samples if sample_name == name}


async def test_metrics_is_the_prometheus_text_format_with_every_family(aiohttp_client: AiohttpClient) -> None:
    """The reply has Prometheus' content type and every documented family, before any traffic."""
    client = await aiohttp_client(create_app())
    reply = await client.get("/metrics")
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/plain; version=")
    families = {family.name: family.type for family in text_string_to_metric_families(await reply.text())}
    assert families["aiobootstrap_registrations"] == "counter"
    assert families["aiobootstrap_gets"] == "counter"
    assert families["aiobootstrap_registered_ranks"] == "gauge"
    assert families["aiobootstrap_parked_waiters"] == "gauge"
    assert families["aiobootstrap_version"] == "gauge"
    assert families["aiobootstrap_namespaces"] == "gauge"
    assert families["aiobootstrap_wake_latency_seconds"] == "histogram"
    assert families["aiobootstrap_request_duration_seconds"] == "histogram"


async def test_registrations_and_ranks_are_counted_per_namespace(aiohttp_client: AiohttpClient) -> None:
    """Registrations count by namespace; a re-registration counts again but holds one rank."""
    client = await aiohttp_client(create_app())
    await register(client, 0)
    await register(client, 0)
    await register(client, 1, "/ns/prefill-0")
    samples = await scrape(client)
    assert value(samples, "aiobootstrap_registrations_total", namespace="default") == 2
    assert value(samples, "aiobootstrap_registrations_total", namespace="prefill-0") == 1
    assert value(samples, "aiobootstrap_registered_ranks", namespace="default") == 1
    assert value(samples, "aiobootstrap_version", namespace="default") == 2
    assert value(samples, "aiobootstrap_namespaces") == 2


async def test_gets_are_counted_by_outcome(aiohttp_client: AiohttpClient) -> None:
    """hit: already there; expired: not there when the wait ended; rejected: an error reply."""
    client = await aiohttp_client(create_app())
    await register(client, 0)
    assert (await client.get("/get_transfer_engine_info", params={"rank": "0"})).status == 200
    assert (await client.get("/get_transfer_engine_info_batch", params={"ranks": "0"})).status == 200
    assert (await client.get("/get_transfer_engine_info", params={"rank": "1", "wait": "0.01"})).status == 404
    assert (await client.get("/get_transfer_engine_info_batch", params={"ranks": "0-1"})).status == 404
    assert (await client.get("/get_transfer_engine_info", params={"rank": "-1"})).status == 400
    assert (await client.get("/get_transfer_engine_info_batch", params={"ranks": "x"})).status == 400
    assert (await client.get("/ns/-bad/get_transfer_engine_info", params={"rank": "0"})).status == 400
    samples = await scrape(client)
    assert value(samples, "aiobootstrap_gets_total", outcome="hit") == 2
    assert value(samples, "aiobootstrap_gets_total", outcome="expired") == 2
    assert value(samples, "aiobootstrap_gets_total", outcome="rejected") == 3
    assert value(samples, "aiobootstrap_gets_total", outcome="woken") == 0
    assert value(samples, "aiobootstrap_wake_latency_seconds_count") == 0


async def test_a_woken_wait_counts_as_woken_and_observes_the_wake_latency(
    aiohttp_client: AiohttpClient,
) -> None:
    """A get (single or batch) answered by a registration during its wait is woken, with one latency each."""
    client = await aiohttp_client(create_app(), server_kwargs={"handler_cancellation": True})
    registry = client.app[REGISTRY]
    single = asyncio.create_task(
        client.get("/ns/a/get_transfer_engine_info", params={"rank": "1", "wait": str(GUARD)})
    )
    batch = asyncio.create_task(
        client.get("/ns/a/get_transfer_engine_info_batch", params={"ranks": "0-1", "wait": str(GUARD)})
    )
    await until(lambda: registry.parked_in("a") == 2)
    samples = await scrape(client)
    assert value(samples, "aiobootstrap_parked_waiters", namespace="a") == 2
    assert value(samples, "aiobootstrap_parked_waiters", namespace="default") == 0
    await register(client, 0, "/ns/a")
    await register(client, 1, "/ns/a")
    replies = await asyncio.wait_for(asyncio.gather(single, batch), GUARD)
    assert [reply.status for reply in replies] == [200, 200]
    samples = await scrape(client)
    assert value(samples, "aiobootstrap_gets_total", outcome="woken") == 2
    assert value(samples, "aiobootstrap_gets_total", outcome="hit") == 0
    assert value(samples, "aiobootstrap_wake_latency_seconds_count") == 2
    assert value(samples, "aiobootstrap_wake_latency_seconds_bucket", le="+Inf") == 2
    assert value(samples, "aiobootstrap_parked_waiters", namespace="a") == 0


async def test_request_duration_is_labelled_by_route_template_not_path(aiohttp_client: AiohttpClient) -> None:
    """Paths with different ranks, namespaces, unknown routes and odd methods make few series."""
    client = await aiohttp_client(create_app())
    for name in ("a", "b", "c"):
        for rank in range(3):
            await client.get(f"/ns/{name}/get_transfer_engine_info", params={"rank": str(rank)})
    for index in range(3):
        assert (await client.get(f"/no/such/route/{index}")).status == 404
        assert (await client.request("TRACE", "/health")).status == 405
    samples = await scrape(client)
    count = "aiobootstrap_request_duration_seconds_count"
    routes = labelled(samples, count, "route")
    # A route with the wrong method is unmatched too: aiohttp resolves no resource for it.
    assert routes == {"/ns/{namespace}/get_transfer_engine_info", "unmatched"}
    assert (
        value(samples, count, route="/ns/{namespace}/get_transfer_engine_info", method="GET", status="404")
        == 9
    )
    assert value(samples, count, route="unmatched", method="GET", status="404") == 3
    assert value(samples, count, route="unmatched", method="other", status="405") == 3
    assert labelled(samples, count, "method") == {"GET", "other"}


async def test_probing_namespaces_does_not_explode_the_namespace_label(aiohttp_client: AiohttpClient) -> None:
    """Gets in hundreds of never-used namespaces leave only a handful of namespace label values."""
    client = await aiohttp_client(create_app())
    for index in range(300):
        await client.get(f"/ns/probe-{index}/get_transfer_engine_info", params={"rank": "0"})
    samples = await scrape(client)
    assert len(labelled(samples, "aiobootstrap_parked_waiters", "namespace")) <= 17


async def test_each_app_counts_apart(aiohttp_client: AiohttpClient) -> None:
    """Two apps in one process do not share metrics (no process-wide default registry)."""
    first = await aiohttp_client(create_app())
    second = await aiohttp_client(create_app())
    await register(first, 0)
    assert value(await scrape(first), "aiobootstrap_registrations_total", namespace="default") == 1
    assert value(await scrape(second), "aiobootstrap_registrations_total", namespace="default") == 0
