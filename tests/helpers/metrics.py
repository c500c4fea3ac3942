"""GET /metrics read back with Prometheus' own parser, into samples a test looks up by name and labels."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

Client = TestClient[web.Request, web.Application]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(client: Client) -> Samples:
    reply = await client.get("/metrics")
    assert reply.status == 200
    samples: Samples = {}
    for family in text_string_to_metric_families(await reply.text()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def register(client: Client, rank: int, prefix: str = "") -> None:
    body = {"rank": rank, "transfer_engine_info": {"session_id": f"s{rank}", "weights_info_dict": {}}}
    reply = await client.put(prefix + "/register_transfer_engine_info", json=body)
    assert reply.status == 200
