"""What the registry gives every record, given to vLLM's workers: namespaces, leases (the header), tokens
(``/register`` writes, ``/query`` reads; vLLM sends none, so its namespace takes tokenless requests),
``/watch``, ``/metrics`` and ``/namespaces``, and the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap.server.tokens import TokenSet

from .helpers.waits import GUARD


def worker(tp: int = 0, engine: str = "e", dp: int = 0) -> dict[str, Any]:
    return {"engine_id": engine, "dp_rank": dp, "tp_rank": tp, "pp_rank": 0, "addr": f"tcp://h:{1000 + tp}"}


async def test_each_namespace_is_its_own_deployment(client: Any) -> None:
    for namespace, engine in (("pd-a", "a"), ("pd-b", "b")):
        assert (await client.post(f"/ns/{namespace}/register", json=worker(engine=engine))).status == 200
    for namespace, engine in (("pd-a", "a"), ("pd-b", "b")):
        got = await (await client.get(f"/ns/{namespace}/query")).json()
        assert got["0"]["engine_id"] == engine
    assert await (await client.get("/query")).read() == b"{}"


async def test_a_worker_on_a_lease_leaves_when_it_ends(client: Any) -> None:
    lease = (await (await client.post("/leases", json={"ttl": 60})).json())["lease"]
    on_lease = {"X-Aiobootstrap-Lease": lease}
    assert (await client.post("/register", json=worker(0), headers=on_lease)).status == 200
    assert (await client.post("/register", json=worker(1))).status == 200
    again = await client.post("/register", json=worker(0), headers=on_lease)  # the same, on its lease again
    assert again.status == 200
    version = (await client.get("/query")).headers["X-Aiobootstrap-Version"]
    assert (await client.delete(f"/leases/{lease}")).status == 200
    changes = await (await client.get(f"/watch?after={version}&wait={GUARD}&kind=vllm_worker")).json()
    assert [(c["op"], c["key"]) for c in changes["changes"]] == [("delete", "dp0-tp0-pp0")]
    assert list((await (await client.get("/query")).json())["0"]["worker_addr"]) == ["1"]
    gone = await client.post("/register", json=worker(2), headers=on_lease)
    assert gone.status == 404  # a lease that ended: nothing stored
    assert (await gone.json())["lease"] == lease
    assert "2" not in (await (await client.get("/query")).json())["0"]["worker_addr"]


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
async def test_the_figures_and_the_counts_show_the_workers(client: Any) -> None:
    for tp in (0, 1, 2):
        assert (await client.post("/ns/pd/register", json=worker(tp))).status == 200
    namespaces = await (await client.get("/namespaces")).json()
    (pd,) = [n for n in namespaces["namespaces"] if n["namespace"] == "pd"]
    assert pd["vllm_workers"] == 3
    metrics = await (await client.get("/metrics")).text()
    assert 'aiobootstrap_vllm_workers{namespace="pd"} 3.0' in metrics
    assert 'kind="vllm_worker"' in metrics
    document = await (await client.get("/openapi.json")).json()
    assert {"/register", "/query", "/vllm", "/ns/{namespace}/query"} <= set(document["paths"])
    assert {"VllmWorker", "VllmQuery", "VllmListing"} <= set(document["components"]["schemas"])


async def test_register_writes_and_query_reads_with_tokens(aiohttp_client: Any) -> None:
    tokens = TokenSet.parse("admin-secret\nreader-secret read\n*  ns=vllm-pd\n")
    guarded = await aiohttp_client(create_app(ServerConfig(auth_tokens=tokens)))
    # vLLM sends no token: its namespace accepts tokenless requests (the token file's * line).
    assert (await guarded.post("/ns/vllm-pd/register", json=worker())).status == 200
    assert (await guarded.get("/ns/vllm-pd/query")).status == 200
    assert (await guarded.post("/register", json=worker())).status == 401
    reader = {"Authorization": "Bearer reader-secret"}
    assert (await guarded.get("/query", headers=reader)).status == 200
    assert (await guarded.post("/register", json=worker(), headers=reader)).status == 403
    admin = {"Authorization": "Bearer admin-secret"}
    assert (await guarded.post("/register", json=worker(), headers=admin)).status == 200
    assert (await guarded.get("/ns/vllm-pd/vllm")).status == 200
