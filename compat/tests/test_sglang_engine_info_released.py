"""SGLang's engine-info bootstrap server, as released, beside aiobootstrap's drop-in.

SGLang's engine constructs ``EngineInfoBootstrapServer(host, port)``
(``sglang/srt/entrypoints/engine_info_bootstrap_server.py``) when it seeds weights through the transfer
engine; each model runner registers with ``RemoteInstanceWeightTransporter._register_to_engine_info_bootstrap``,
the HTTP server's ``/remote_instance_transfer_engine_info`` reads a rank back over HTTP, and the engine
reads the server object in-process (``get_transfer_engine_info(rank)``). The same requests go to SGLang's
server and to aiobootstrap's ``ThreadedBootstrapServer``, and the released callers run against both.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import types
from collections.abc import Iterator
from typing import Any

import pytest
from released import Reply, aiobootstrap_engine_info_server, ask, sglang_engine_info_server
from sglang.srt.model_executor.model_runner_components import (
    remote_instance_weight_transporter as transporter,
)

ADDED = {"version"}
"""What aiobootstrap's engine-info reply adds to SGLang's (SPEC section 1: a counter for ``&after=``); SGLang's
readers take the keys they know."""

WEIGHTS = {
    "model.embed_tokens.weight": [140000000000, 1048576, 2],
    "lm_head.weight": [140002097152, 1048576, 2],
}


def registration(tp_rank: int, session_id: str | None = None, weights: Any = WEIGHTS) -> dict[str, Any]:
    """The body ``_register_to_engine_info_bootstrap`` sends (SGLang 0.5.23)."""
    return {
        "tp_rank": tp_rank,
        "transfer_engine_info": {
            "session_id": session_id or f"127.0.0.1:{15000 + tp_rank}",
            "weights_info_dict": weights,
        },
    }


@dataclasses.dataclass(frozen=True)
class Step:
    """``same``: status and body equal, but for ``ADDED`` keys in aiobootstrap's JSON. ``status``: statuses equal (SGLang's callers read the body of a 200 only;
    the two servers word their 4xx details differently). ``expect``: each side's status, a difference made on
    purpose (``why``)."""

    name: str
    method: str
    path: str
    json: Any = None
    agree: str = "same"
    expect: tuple[int, int] | None = None
    why: str = ""


SCRIPT = [
    Step("health", "GET", "/health"),
    Step("rank 0 before any", "GET", "/get_transfer_engine_info?rank=0", agree="status"),
    Step("rank 0 registers", "PUT", "/register_transfer_engine_info", registration(0)),
    Step("rank 1 registers", "PUT", "/register_transfer_engine_info", registration(1)),
    Step("rank 0", "GET", "/get_transfer_engine_info?rank=0"),
    Step("rank 1", "GET", "/get_transfer_engine_info?rank=1"),
    Step("rank 2, never registered", "GET", "/get_transfer_engine_info?rank=2", agree="status"),
    Step("rank -1", "GET", "/get_transfer_engine_info?rank=-1", agree="status"),
    Step(
        "rank 0 registers again, another session",
        "PUT",
        "/register_transfer_engine_info",
        registration(0, "x:1"),
    ),
    Step("rank 0 after", "GET", "/get_transfer_engine_info?rank=0"),
    Step(
        "a body without session_id",
        "PUT",
        "/register_transfer_engine_info",
        {"tp_rank": 3, "transfer_engine_info": {"weights_info_dict": {}}},
        agree="status",
    ),
    Step("rank 3 after the refusal", "GET", "/get_transfer_engine_info?rank=3", agree="status"),
]


@pytest.fixture
def both() -> Iterator[dict[str, tuple[str, Any]]]:
    with sglang_engine_info_server() as theirs, aiobootstrap_engine_info_server() as ours:
        yield {"sglang": theirs, "aiobootstrap": ours}


def without_added(body: Any) -> Any:
    return {key: value for key, value in body.items() if key not in ADDED} if isinstance(body, dict) else body


def disagreement(step: Step, theirs: Reply, ours: Reply) -> str | None:
    if step.agree == "same":
        return None if theirs == Reply(ours.status, without_added(ours.body)) else "replies differ"
    if step.agree == "status":
        return None if theirs.status == ours.status else "statuses differ"
    return None if (theirs.status, ours.status) == step.expect else f"expected statuses {step.expect}"


def test_the_same_requests_get_the_same_replies(both: dict[str, tuple[str, Any]]) -> None:
    table = []
    for step in SCRIPT:
        replies = [
            ask(both[side][0], step.method, step.path, step.json) for side in ("sglang", "aiobootstrap")
        ]
        problem = disagreement(step, *replies)
        if problem:
            table.append(
                f"- {step.name} ({step.method} {step.path}): {problem}\n"
                f"    SGLang:       {replies[0].status} {replies[0].body!r}\n"
                f"    aiobootstrap: {replies[1].status} {replies[1].body!r}"
                + (f"\n    ({step.why})" if step.why else "")
            )
    assert not table, "aiobootstrap and SGLang's released engine-info server disagree:\n" + "\n".join(table)


def runner(monkeypatch: pytest.MonkeyPatch, addr: str, tp_rank: int) -> Any:
    """A model runner's ``RemoteInstanceWeightTransporter`` with what ``_register_to_engine_info_bootstrap`` reads:
    its ``tp_rank``, ``session_id`` and ``weight_info``; of SGLang's runtime context (imported by name in its
    module), ``get_parallel().dist_init_addr`` (unset: a single node, so 127.0.0.1) and
    ``get_model().engine_info_bootstrap_port``."""
    port = int(addr.rsplit(":", 1)[1])
    monkeypatch.setattr(transporter, "get_parallel", lambda: types.SimpleNamespace(dist_init_addr=None))
    monkeypatch.setattr(
        transporter, "get_model", lambda: types.SimpleNamespace(engine_info_bootstrap_port=port)
    )
    made = object.__new__(transporter.RemoteInstanceWeightTransporter)
    made.tp_rank = tp_rank
    made.session_id = f"127.0.0.1:{15000 + tp_rank}"
    made.weight_info = WEIGHTS
    return made


def test_the_released_callers_conclude_the_same(
    both: dict[str, tuple[str, Any]], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Two model runners register through the released method (it logs which way it went); the engine reads
    the server object in-process; the HTTP server's released ``/remote_instance_transfer_engine_info``
    handler reads a rank over HTTP: each concludes the same through either server."""
    from sglang.srt.entrypoints import http_server

    concluded = {}
    for side, (addr, server) in both.items():
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=transporter.__name__):
            for tp_rank in (0, 1):
                runner(monkeypatch, addr, tp_rank)._register_to_engine_info_bootstrap()
        logged = [(record.levelname, record.getMessage().split(" with ")[0]) for record in caplog.records]
        # What the handler reads: _global_state.tokenizer_manager.server_args.engine_info_bootstrap_url.
        state = types.SimpleNamespace(
            tokenizer_manager=types.SimpleNamespace(
                server_args=types.SimpleNamespace(engine_info_bootstrap_url=f"http://{addr}")
            )
        )
        monkeypatch.setattr(http_server, "_global_state", state)
        over_http = {}
        for rank in (0, 1, 2):
            answer = asyncio.run(http_server.remote_instance_transfer_engine_info(rank=rank))
            over_http[rank] = (
                without_added(answer)
                if isinstance(answer, dict)
                else (answer.status_code, bytes(answer.body))
            )
        in_process = {rank: server.get_transfer_engine_info(rank) for rank in (0, 1, 2)}
        concluded[side] = logged, over_http, in_process
    assert concluded["sglang"][0] == [
        ("INFO", "Registered transfer engine info for tp_rank=0"),
        ("INFO", "Registered transfer engine info for tp_rank=1"),
    ]
    assert concluded["aiobootstrap"] == concluded["sglang"]
