"""vLLM's Mooncake connector bootstrap, byte for byte where vLLM's code reads it: ``POST /register``'s
``200`` and mismatch ``400`` (status, JSON, vLLM's sentence), ``GET /query``'s shape with string keys and
compact JSON as FastAPI writes it, and a malformed body a ``400`` with one sentence, nothing stored."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from aiobootstrap.exceptions import BadRequest
from aiobootstrap.wire.vllm import (
    Readiness,
    Worker,
    mismatch_detail,
    moved_detail,
    parse_readiness,
    parse_register,
    query_reply,
    ranks_of_name,
    read_query,
)
from testbed.redis_server import free_port


def body(
    engine: str = "e-1", dp: int = 0, tp: int = 0, pp: int = 0, port: int = 0, **extra: Any
) -> dict[str, Any]:
    return {
        "engine_id": engine,
        "dp_rank": dp,
        "tp_rank": tp,
        "pp_rank": pp,
        "addr": f"tcp://127.0.0.1:{port or free_port()}",
        **extra,
    }


async def test_register_and_query_are_vllms_bytes(client: Any) -> None:
    assert await (await client.get("/query")).read() == b"{}"
    workers = [body(tp=tp, pp=pp, port=17000 + 2 * tp + pp) for tp in (0, 1) for pp in (0, 1)]
    for worker in workers:
        reply = await client.post("/register", json=worker)
        assert (reply.status, reply.content_type, await reply.read()) == (
            200,
            "application/json",
            b'{"status":"ok"}',
        )
    reply = await client.post("/register", json=body(dp=1, port=18000, extra_field=[1]))  # a newer vLLM's
    assert reply.status == 200
    got = await client.get("/query")
    assert got.status == 200
    assert got.content_type == "application/json"
    assert int(got.headers["X-Aiobootstrap-Version"]) >= 5
    assert await got.read() == (
        b'{"0":{"engine_id":"e-1","worker_addr":{"0":{"0":"tcp://127.0.0.1:17000","1":"tcp://127.0.0.1:17001"},'
        b'"1":{"0":"tcp://127.0.0.1:17002","1":"tcp://127.0.0.1:17003"}}},'
        b'"1":{"engine_id":"e-1","worker_addr":{"0":{"0":"tcp://127.0.0.1:18000"}}}}'
    )
    # Decode's reading: every value's engine_id and worker_addr, int() of the keys; TP size len(worker_addr).
    engines = read_query(json.loads(await got.read()))
    assert engines[0].tp_size == 2
    assert engines[0].worker_addr[1][1] == "tcp://127.0.0.1:17003"


async def test_another_live_engine_is_vllms_mismatch_sentence(client: Any, unused_tcp_port: int) -> None:
    with socket.create_server(("127.0.0.1", unused_tcp_port)) as live:  # the holder's side channel answers
        assert live
        first = await client.post("/register", json=body("engine-a", dp=3, port=unused_tcp_port))
        assert first.status == 200
        refused = await client.post("/register", json=body("engine-b", dp=3, tp=1))
        assert refused.status == 400
        assert refused.content_type == "application/json"
        assert (
            await refused.read()
            == b'{"detail":"Engine ID mismatch for dp_rank=3: expected engine-a, got engine-b"}'
        )
    assert list(json.loads(await (await client.get("/query")).read())["3"]["worker_addr"]) == ["0"]


@pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (b"not json", "is not JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (b'{"engine_id": "e", "dp_rank": 0, "tp_rank": 0, "addr": "tcp://h:1"}', "lacks pp_rank"),
        (
            b'{"engine_id": "", "dp_rank": 0, "tp_rank": 0, "pp_rank": 0, "addr": "tcp://h:1"}',
            "engine_id must be",
        ),
        (
            b'{"engine_id": "e", "dp_rank": -1, "tp_rank": 0, "pp_rank": 0, "addr": "tcp://h:1"}',
            "dp_rank must be",
        ),
        (
            b'{"engine_id": "e", "dp_rank": true, "tp_rank": 0, "pp_rank": 0, "addr": "tcp://h:1"}',
            "dp_rank must be",
        ),
        (
            b'{"engine_id": "e", "dp_rank": 0, "tp_rank": 1.5, "pp_rank": 0, "addr": "tcp://h:1"}',
            "tp_rank must be",
        ),
        (
            b'{"engine_id": "e", "dp_rank": "0", "tp_rank": 0, "pp_rank": 0, "addr": "tcp://h:1"}',
            "dp_rank must be",
        ),
        (
            b'{"engine_id": "\\ud800", "dp_rank": 0, "tp_rank": 0, "pp_rank": 0, "addr": "tcp://h:1"}',
            "UTF-8",
        ),
        (b'{"engine_id": "e", "dp_rank": 0, "tp_rank": 0, "pp_rank": 0, "addr": 7}', "addr must be"),
    ],
)
async def test_a_malformed_body_is_a_400_sentence_and_nothing_is_stored(
    client: Any, payload: bytes, says: str
) -> None:
    reply = await client.post("/register", data=payload, headers={"Content-Type": "application/json"})
    assert reply.status == 400
    detail = (await reply.json())["detail"]
    assert says in detail
    assert detail.endswith(".")
    assert detail.count(". ") == 0
    assert await (await client.get("/query")).read() == b"{}"
    assert (await (await client.get("/watch?after=0")).json())["changes"] == []


def test_the_sentences_are_vllms() -> None:
    assert mismatch_detail(0, "a", "b") == "Engine ID mismatch for dp_rank=0: expected a, got b"
    assert moved_detail(1, 2, 3, "tcp://h:1", "tcp://h:2") == (
        "Worker with dp_rank=1, tp_rank=2, pp_rank=3 is already registered at tcp://h:1, "
        "but still want to register at tcp://h:2"
    )


def test_the_wire_both_ways() -> None:
    worker = parse_register(
        b'{"engine_id":"e","dp_rank":2,"tp_rank":10,"pp_rank":1,"addr":"tcp://h:1","x":{}}'
    )
    assert worker == Worker("e", 2, 10, 1, "tcp://h:1")
    assert Worker.from_value(worker.as_value()) == worker
    assert ranks_of_name(worker.name) == (2, 10, 1)
    assert ranks_of_name("dp2") is None
    two = Worker("e", 2, 2, 0, "tcp://h:2")
    assert list(query_reply([worker, two])["2"]["worker_addr"]) == ["2", "10"]  # numeric order, string keys
    assert query_reply([]) == {}
    with pytest.raises(ValueError, match="engine_id"):
        read_query({"0": {"worker_addr": {}}})


def test_readiness_parameters_and_what_is_missing() -> None:
    assert parse_readiness({}) is None
    assert parse_readiness({"tp_size": "2", "dp_size": "3"}) == Readiness(2, 1, 3)
    assert parse_readiness({"dp_size": "2"}) == Readiness(
        None, 1, 2
    )  # the dp ranks counted, not their workers
    assert Readiness(None, 1, 2).missing([Worker("e", 0, 5, 0, "a")]) == "1 of 2 dp ranks registered."
    for bad in ({"tp_size": "0"}, {"tp_size": "x"}, {"tp_size": "٣"}, {"pp_size": "10000000"}):
        with pytest.raises(BadRequest):
            parse_readiness(bad)
    ready = Readiness(2, pp_size=1, dp_size=2)
    one = [Worker("e", 0, 0, 0, "a"), Worker("e", 0, 1, 0, "b")]
    assert ready.missing([]) == "0 of 2 dp ranks registered (each of tp_size=2, pp_size=1)."
    assert ready.missing([*one, Worker("f", 1, 1, 0, "c")]) == "dp_rank=1 lacks tp_rank=0 pp_rank=0."
    assert ready.missing([*one, Worker("f", 1, 1, 0, "c"), Worker("f", 1, 0, 0, "d")]) is None
