"""SGLang's prefill bootstrap, as released (compat/engines.txt), beside aiobootstrap's prefill face.

Two checks, each against SGLang's own ``CommonKVBootstrapServer`` (``sglang/srt/disaggregation/common/
conn.py``, started as its prefill side starts it) and aiobootstrap's drop-in ``PrefillBootstrapServer``:

- an automated diff: one scripted sequence of requests (a 2-rank deployment registering with the
  release's body, ``GET /route`` for each rank and ``-1``, an incomplete deployment, a rank registering
  again, refused ranks, the dp-rank rooms) sent to both, every reply compared where SGLang's clients read
  it; the few differences SPEC section 13 makes on purpose are named, each with what each side answers;
- SGLang's released client methods (``register_to_bootstrap``, ``try_ensure_parallel_info``,
  ``_get_bootstrap_info_from_server``, ``_register_prefill_dp_rank``, ``query_prefill_dp_ranks``) run
  against both servers, on objects made with ``object.__new__`` and the attributes each method reads
  (named below), and their conclusions compared (``PrefillServerInfo`` field by field, addresses, rooms).

A release that changes what its server answers or what its clients read fails here: a new attribute read
is an ``AttributeError``, a new field sent shows in the diff.
"""

from __future__ import annotations

import dataclasses
import json
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from released import (
    HOST,
    Reply,
    aiobootstrap_cli_server,
    aiobootstrap_prefill_server,
    ask,
    sglang_prefill_server,
    tp2_place,
)
from sglang.srt.disaggregation.base.conn import KVArgs
from sglang.srt.disaggregation.common import conn

AIOBOOTSTRAPS = {
    "PrefillBootstrapServer": aiobootstrap_prefill_server,
    "python -m aiobootstrap": aiobootstrap_cli_server,
}
"""aiobootstrap's prefill face as the engine's drop-in (in process), and as an external server."""

# ---- The bodies: what register_to_bootstrap sends (conn.py), for a 2-rank TP deployment ----

MID_2026: dict[str, Any] = {}
"""A prefill of mid-2026 (SGLang's main then): none of the fields 0.5.23 added."""

RELEASE_DEFAULTS: dict[str, Any] = {
    "kv_layout": None,
    "dsv41_spec_layout": None,
    "decode_allocation_policy": "early",
    "enable_dsa_cache_layer_split": False,
    "enable_kv_cache_sharding": False,
    "prefill_http_port": 30000,
}
"""0.5.23's added fields as a plain launch sends them (``kv_layout`` is None but for DeepSeek V4's pool)."""

RELEASE_DSV4: dict[str, Any] = {
    "kv_layout": "bf16,c4:fp8_e4m3",
    "dsv41_spec_layout": {
        "num_draft_tokens": 4,
        "compression_ratios": [0, 2, 4],
        "kv_layer_ids": [0, 1],
        "kv_item_lens": [576, 576],
        "state_types": ["swa", "swa"],
        "state_item_lens": [[64], [64]],
    },
    "decode_allocation_policy": "prefill_complete",
    "enable_dsa_cache_layer_split": True,
    "enable_kv_cache_sharding": True,
    "prefill_http_port": 30001,
}
"""0.5.23's added fields, each away from its default (DeepSeek V4.1 with DSpark, sharded, late allocation)."""

RELEASES = {"mid-2026": MID_2026, "0.5.23": RELEASE_DEFAULTS, "0.5.23 DSV4": RELEASE_DSV4}


def body(tp_rank: int, added: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A prefill rank's ``PUT /route`` body: 0.5.23's ``register_to_bootstrap`` payload, keys in its order."""
    sent = {
        **tp2_place(tp_rank),
        "rank_ip": HOST,
        "rank_port": 17000 + tp_rank,
        "page_size": 64,
        "kv_cache_dtype": "bfloat16",
        "load_balance_method": "follow_bootstrap_room",
    }
    sent.update(added)
    sent.update(changes)
    return sent


# ---- The automated diff ----

ALL = "/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1"


def rank(tp: int) -> str:
    return f"/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank={tp}&target_pp_rank=0"


@dataclasses.dataclass(frozen=True)
class Step:
    """One request of the script, and how the two servers' replies must agree.

    ``same``: status and body equal. ``decode``: status equal, and SGLang's decode concludes the same
    (``PrefillServerInfo(**reply)`` equal field by field), and aiobootstrap's reply has no key SGLang's
    server would not send (an older decode's ``PrefillServerInfo`` would raise ``TypeError`` on it).
    ``refused``: both refuse (``register_to_bootstrap`` reads only ``status_code == 200``), aiobootstrap
    with a 4xx JSON detail carrying SGLang's sentence. ``expect``: a difference SPEC section 13 makes on
    purpose, each side's status given, with ``why``.
    """

    name: str
    method: str
    path: str
    json: Any = None
    agree: str = "same"
    expect: tuple[int, int] | None = None  # (SGLang's status, aiobootstrap's) for agree="expect"
    why: str = ""


def script(added: dict[str, Any]) -> list[Step]:
    """The sequence for a deployment whose ranks send ``added`` beyond the mid-2026 body."""
    release = bool(added)
    info = "same" if release else "decode"  # a mid-2026 body: SGLang's server adds its defaults' keys
    steps = [
        Step("health", "GET", "/health"),
        Step("parallel info before any rank", "GET", ALL),
        Step("rank before any", "GET", rank(0)),
        Step("a parameter missing", "GET", "/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=0"),
        Step(
            "a parameter empty",
            "GET",
            "/route?prefill_dp_rank=&prefill_cp_rank=0&target_tp_rank=0&target_pp_rank=0",
        ),
        Step("tp 0 registers", "PUT", "/route", body(0, added)),
        Step("parallel info, 1 of 2 registered", "GET", ALL),
        Step("tp 0 while incomplete", "GET", rank(0)),
        Step("tp 1 registers", "PUT", "/route", body(1, added)),
        Step("parallel info", "GET", ALL, agree=info),
        Step("tp 0", "GET", rank(0)),
        Step("tp 1", "GET", rank(1)),
        Step("tp 2, not in the topology", "GET", rank(2)),
        Step("tp 1 registers again, another port", "PUT", "/route", body(1, added, rank_port=17099)),
        Step("tp 1 after it moved", "GET", rank(1)),
        Step("a room's dp rank", "POST", "/register_dp_rank", {"bootstrap_room": 7, "dp_rank": 0}),
        Step("another room's", "POST", "/register_dp_rank", {"bootstrap_room": 8, "dp_rank": 1}),
        Step("rooms asked, one unknown", "POST", "/query_dp_ranks", {"bootstrap_rooms": [7, 8, 9]}),
        Step("no rooms asked", "POST", "/query_dp_ranks", {"bootstrap_rooms": []}),
    ]
    if release:
        other_policy = "early" if added["decode_allocation_policy"] != "early" else "prefill_complete"
        other_layout = {"num_draft_tokens": 8} if added["dsv41_spec_layout"] is None else None
        steps += [
            Step(
                "tp 1 with another decode_allocation_policy",
                "PUT",
                "/route",
                body(1, added, decode_allocation_policy=other_policy),
                agree="refused",
            ),
            Step(
                "tp 1 with another dsv41_spec_layout",
                "PUT",
                "/route",
                body(1, added, dsv41_spec_layout=other_layout),
                agree="refused",
            ),
            Step("tp 1 after the refusals", "GET", rank(1)),
        ]
    steps += [
        Step("parallel info at the end", "GET", ALL, agree=info),
        Step(
            "a body without rank_port",
            "PUT",
            "/route",
            {key: value for key, value in body(1, added).items() if key != "rank_port"},
            agree="expect",
            expect=(500, 400),
            why="SPEC 13: a malformed body is a 400 with a JSON detail (SGLang's handler raises KeyError)",
        ),
        Step(
            "tp 2 of a TP 4 deployment, against the registered TP 2",
            "PUT",
            "/route",
            body(2, added, attn_tp_size=4),
            agree="expect",
            expect=(200, 409),
            why="SPEC 13: sizes that contradict the registered topology are a 409 (SGLang keeps the first silently)",
        ),
    ]
    return steps


def disagreement(step: Step, theirs: Reply, ours: Reply) -> str | None:
    """Why the two replies do not agree as ``step`` says, or None."""
    if step.agree == "same":
        return None if theirs == ours else "replies differ"
    if step.agree == "decode":
        if theirs.status != ours.status:
            return "statuses differ"
        if theirs.status != 200:
            return None if theirs == ours else "replies differ"
        extra = set(ours.body) - set(theirs.body)
        if extra:
            return f"aiobootstrap sends keys SGLang's server does not: {sorted(extra)}"
        concluded = (
            dataclasses.asdict(conn.PrefillServerInfo(**theirs.body)),
            dataclasses.asdict(conn.PrefillServerInfo(**ours.body)),
        )
        return None if concluded[0] == concluded[1] else "PrefillServerInfo(**reply) differs"
    if step.agree == "refused":
        if theirs.status != 400 or not isinstance(theirs.body, str):
            return f"SGLang's server no longer refuses with a 400 text (SPEC 13 follows it): {theirs}"
        if not 400 <= ours.status < 500 or theirs.body not in json.dumps(ours.body):
            return "aiobootstrap does not refuse with a 4xx carrying SGLang's sentence"
        return None
    assert step.agree == "expect", step.agree
    assert step.expect is not None, step.name
    return None if (theirs.status, ours.status) == step.expect else f"expected statuses {step.expect}"


@pytest.fixture
def both() -> Iterator[dict[str, str]]:
    """Both servers, fresh, by name: their ``host:port`` (the form SGLang's ``bootstrap_addr`` takes)."""
    with sglang_prefill_server() as theirs, aiobootstrap_prefill_server() as ours:
        yield {"sglang": theirs, "aiobootstrap": ours}


@pytest.fixture(params=AIOBOOTSTRAPS)
def both_ways(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """As ``both``, with aiobootstrap in process and as ``python -m aiobootstrap`` in turn."""
    with sglang_prefill_server() as theirs, AIOBOOTSTRAPS[request.param]() as ours:
        yield {"sglang": theirs, "aiobootstrap": ours}


@pytest.mark.parametrize("release", RELEASES)
def test_the_same_requests_get_the_same_replies(both_ways: dict[str, str], release: str) -> None:
    """The scripted sequence against both servers: every step's replies agree as the step says."""
    both = both_ways
    table = []
    for step in script(RELEASES[release]):
        replies = [ask(both[side], step.method, step.path, step.json) for side in ("sglang", "aiobootstrap")]
        problem = disagreement(step, *replies)
        if problem:
            table.append(
                f"- {step.name} ({step.method} {step.path}): {problem}\n"
                f"    SGLang:       {replies[0].status} {replies[0].body!r}\n"
                f"    aiobootstrap: {replies[1].status} {replies[1].body!r}"
                + (f"\n    ({step.why})" if step.why else "")
            )
    assert not table, f"aiobootstrap and SGLang's released server disagree ({release} body):\n" + "\n".join(
        table
    )


def test_readiness_counts_ranks_not_registrations(both_ways: dict[str, str]) -> None:
    """SPEC 13 on purpose: one rank registering twice is not a complete TP 2 deployment (SGLang's server counts
    PUTs and calls it complete, then answers 404 for the rank that never came)."""
    for addr in both_ways.values():
        for _ in range(2):
            assert (
                requests.put(f"http://{addr}/route", json=body(0, RELEASE_DEFAULTS), timeout=30).status_code
                == 200
            )
    statuses = {
        side: requests.get(f"http://{addr}{ALL}", timeout=30).status_code for side, addr in both_ways.items()
    }
    assert statuses == {"sglang": 200, "aiobootstrap": 503}


# ---- SGLang's released client methods against both servers ----


def runtime(monkeypatch: pytest.MonkeyPatch, added: dict[str, Any]) -> None:
    """What ``register_to_bootstrap`` reads of SGLang's runtime context, which ``conn.py`` imports by name:
    ``get_parallel()``'s ``enable_cp_tp_group_sharing``, ``load_balance_method``,
    ``enable_dsa_cache_layer_split``, ``enable_kv_cache_sharding``; ``get_serving().port``;
    ``get_disagg().disaggregation_decode_allocation_policy``: the values a launched engine publishes."""
    launch = {**RELEASE_DEFAULTS, **added}
    parallel = types.SimpleNamespace(
        enable_cp_tp_group_sharing=False,
        load_balance_method="follow_bootstrap_room",
        enable_dsa_cache_layer_split=launch["enable_dsa_cache_layer_split"],
        enable_kv_cache_sharding=launch["enable_kv_cache_sharding"],
    )
    monkeypatch.setattr(conn, "get_parallel", lambda: parallel)
    monkeypatch.setattr(conn, "get_serving", lambda: types.SimpleNamespace(port=launch["prefill_http_port"]))
    monkeypatch.setattr(
        conn,
        "get_disagg",
        lambda: types.SimpleNamespace(
            disaggregation_decode_allocation_policy=launch["decode_allocation_policy"]
        ),
    )


def sent_bodies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], int]]:
    """Every ``PUT`` conn.py's ``requests`` sends from now on, with the status it got (``register_to_bootstrap``
    returns nothing; its conclusion is whether a reply was 200). Its retries' sleeps are skipped."""
    sent: list[tuple[dict[str, Any], int]] = []

    def put(url: str, json: dict[str, Any], timeout: float) -> requests.Response:
        response = requests.put(url, json=json, timeout=timeout)
        sent.append((json, response.status_code))
        return response

    monkeypatch.setattr(conn, "requests", types.SimpleNamespace(**{**vars(requests), "put": put}))
    monkeypatch.setattr(conn, "time", types.SimpleNamespace(**{**vars(time), "sleep": lambda _seconds: None}))
    return sent


def prefill_rank(addr: str, tp_rank: int, added: dict[str, Any]) -> conn.CommonKVManager:
    """A prefill rank's ``CommonKVManager`` with what ``register_to_bootstrap`` reads of it."""
    host, port = addr.rsplit(":", 1)
    kv_args = object.__new__(KVArgs)
    kv_args.page_size = 64
    manager = object.__new__(conn.CommonKVManager)
    launch = {**RELEASE_DEFAULTS, **added}
    for name, value in {
        "dist_init_addr": None,
        "bootstrap_host": host,
        "bootstrap_port": int(port),
        **tp2_place(tp_rank),
        "local_ip": HOST,
        "rank_port": 17000 + tp_rank,
        "kv_args": kv_args,
        "kv_cache_dtype_str": "bfloat16",
        "kv_layout": launch["kv_layout"],
        "dsv41_spec_layout": launch["dsv41_spec_layout"],
    }.items():
        setattr(manager, name, value)
    return manager


@dataclasses.dataclass(frozen=True)
class Decode:
    """A decode instance's shape, as ``try_ensure_parallel_info`` and ``_resolve_rank_mapping`` read it."""

    attn_tp_size: int = 2
    engine_rank: int = 1
    is_mla_backend: bool = False
    kv_layout: str | None = "prefill's"  # "prefill's": the same as the prefill side (else a mismatch)
    dsv41_spec_layout: Any = "prefill's"


DECODES = {
    "TP 2, rank 1": Decode(),
    "TP 1 (pulls from both prefill ranks)": Decode(attn_tp_size=1, engine_rank=0),
    "MLA, TP 2": Decode(is_mla_backend=True),
    "another kv_layout": Decode(kv_layout="bf16"),
}


def decode_manager(shape: Decode, added: dict[str, Any]) -> conn.CommonKVManager:
    """A decode rank's ``CommonKVManager`` with what ``try_ensure_parallel_info`` reads of it."""
    launch = {**RELEASE_DEFAULTS, **added}
    kv_args = object.__new__(KVArgs)
    kv_args.page_size = 64
    kv_args.engine_rank = shape.engine_rank
    kv_args.state_types = []
    manager = object.__new__(conn.CommonKVManager)
    for name, value in {
        "prefill_info_table": {},
        "kv_args": kv_args,
        "kv_cache_dtype_str": "bfloat16",
        "attn_tp_size": shape.attn_tp_size,
        "attn_cp_size": 1,
        "attn_cp_rank": 0,
        "pp_size": 1,
        "pp_rank": 0,
        "kv_layout": launch["kv_layout"] if shape.kv_layout == "prefill's" else shape.kv_layout,
        "dsv41_spec_layout": (
            launch["dsv41_spec_layout"] if shape.dsv41_spec_layout == "prefill's" else shape.dsv41_spec_layout
        ),
        "is_mla_backend": shape.is_mla_backend,
        "is_hybrid_mla_backend": False,
        "dcp_size": 1,
        "enable_all_cp_ranks_for_transfer": False,
    }.items():
        setattr(manager, name, value)
    return manager


def conclusion(call: Callable[[], Any]) -> Any:
    """What a method concluded: its result, or the error it raised (SGLang raises on a mismatch)."""
    try:
        return call()
    except Exception as error:  # the conclusion compared, whatever it is
        return f"{type(error).__name__}: {error}"


def register_deployment(
    monkeypatch: pytest.MonkeyPatch, addr: str, added: dict[str, Any], ranks: tuple[int, ...] = (0, 1)
) -> list[tuple[dict[str, Any], int]]:
    runtime(monkeypatch, added)
    sent = sent_bodies(monkeypatch)
    for tp_rank in ranks:
        prefill_rank(addr, tp_rank, added).register_to_bootstrap()
    return sent


@pytest.mark.parametrize("release", ["0.5.23", "0.5.23 DSV4"])
def test_register_to_bootstrap_sends_the_body_the_diff_sends(
    both: dict[str, str], monkeypatch: pytest.MonkeyPatch, release: str
) -> None:
    """The released ``register_to_bootstrap`` sends exactly the keys this file's ``body`` does (a release that
    adds a field fails here first: add it to ``RELEASE_*``), and both servers take it."""
    for side, addr in both.items():
        sent = register_deployment(monkeypatch, addr, RELEASES[release])
        assert [status for _, status in sent] == [200, 200], side
        assert [json for json, _ in sent] == [body(0, RELEASES[release]), body(1, RELEASES[release])]


PAIRS = [
    (release, decode)
    for release in ("mid-2026", "0.5.23", "0.5.23 DSV4")
    for decode, shape in DECODES.items()
    # DSpark PD needs the same TP on both sides: try_ensure_parallel_info raises on any other (not a wire matter).
    if not (RELEASES[release].get("dsv41_spec_layout") and shape.attn_tp_size != 2)
]


@pytest.mark.parametrize(("release", "decode"), PAIRS)
def test_decode_concludes_the_same(
    both: dict[str, str], monkeypatch: pytest.MonkeyPatch, release: str, decode: str
) -> None:
    """Prefill ranks register with the released ``register_to_bootstrap``; a decode's released
    ``try_ensure_parallel_info`` (its ``PrefillServerInfo`` and rank mapping, or the mismatch it raises) and
    ``_get_bootstrap_info_from_server`` for each rank it targets conclude the same through either server."""
    added = RELEASES[release]
    shape = DECODES[decode]
    concluded = {}
    for side, addr in both.items():
        register_deployment(monkeypatch, addr, added)
        manager = decode_manager(shape, added)
        ready = conclusion(lambda manager=manager, addr=addr: manager.try_ensure_parallel_info(addr))
        info = manager.prefill_info_table.get(addr)
        receiver = object.__new__(conn.CommonKVReceiver)
        receiver.bootstrap_addr = addr  # all _get_bootstrap_info_from_server reads of the receiver
        ranks = {
            tp: receiver._get_bootstrap_info_from_server(0, 0, tp, 0)
            for tp in (info.target_tp_ranks if info is not None else [0, 1])
        }
        concluded[side] = (ready, info and dataclasses.asdict(info), ranks)
    assert concluded["aiobootstrap"] == concluded["sglang"]


def test_an_incomplete_deployment_is_not_ready_through_either(
    both: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One of two ranks registered: the decode's released methods find no parallel info and no rank."""
    concluded = {}
    for side, addr in both.items():
        sent = register_deployment(monkeypatch, addr, RELEASE_DEFAULTS, ranks=(0,))
        manager = decode_manager(DECODES["TP 2, rank 1"], RELEASE_DEFAULTS)
        receiver = object.__new__(conn.CommonKVReceiver)
        receiver.bootstrap_addr = addr
        concluded[side] = (
            [status for _, status in sent],
            manager.try_ensure_parallel_info(addr),
            manager.prefill_info_table,
            receiver._get_bootstrap_info_from_server(0, 0, 0, 0),
        )
    assert concluded["sglang"] == ([200], False, {}, None)
    assert concluded["aiobootstrap"] == concluded["sglang"]


@pytest.mark.parametrize("field", ["decode_allocation_policy", "dsv41_spec_layout"])
def test_a_rank_refused_by_sglang_is_refused_by_aiobootstrap(
    both: dict[str, str], monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    """A later rank launched with another allocation policy or DSpark layout: the released
    ``register_to_bootstrap`` gets no 200 from either server (it tries 5 times, then logs an error), and the
    decode's parallel info keeps the first rank's value."""
    other = {"decode_allocation_policy": "prefill_complete", "dsv41_spec_layout": {"num_draft_tokens": 8}}[
        field
    ]
    concluded = {}
    for side, addr in both.items():
        first = register_deployment(monkeypatch, addr, RELEASE_DEFAULTS, ranks=(0,))
        second = register_deployment(monkeypatch, addr, {**RELEASE_DEFAULTS, field: other}, ranks=(1,))
        register_deployment(monkeypatch, addr, RELEASE_DEFAULTS, ranks=(1,))
        manager = decode_manager(DECODES["TP 2, rank 1"], RELEASE_DEFAULTS)
        ready = manager.try_ensure_parallel_info(addr)
        info = manager.prefill_info_table.get(addr)
        concluded[side] = (
            [status for _, status in first],
            [status == 200 for _, status in second],
            ready,
            info and dataclasses.asdict(info),
        )
    assert concluded["sglang"][1] == [False] * 5
    assert concluded["aiobootstrap"] == concluded["sglang"]


def test_the_rooms_dp_ranks_through_the_released_methods(both: dict[str, str]) -> None:
    """The prefill sender's released ``_register_prefill_dp_rank`` records rooms; the decode's released
    ``query_prefill_dp_ranks`` reads them back (the known rooms only, keys as strings) from either server."""
    concluded = {}
    for side, addr in both.items():
        for room, dp_rank in ((11, 0), (12, 1), (2**63 - 1, 1)):
            owner = object.__new__(conn.CommonKVManager)
            owner.attn_dp_rank = dp_rank
            sender = object.__new__(conn.CommonKVSender)
            # What _register_prefill_dp_rank reads of the sender.
            sender.bootstrap_server_url = addr
            sender.bootstrap_room = room
            sender.kv_mgr = owner
            sender._register_prefill_dp_rank()
        concluded[side] = conn.CommonKVReceiver.query_prefill_dp_ranks(addr, [11, 12, 13, 2**63 - 1])
    assert concluded["sglang"] == {"11": 0, "12": 1, str(2**63 - 1): 1}
    assert concluded["aiobootstrap"] == concluded["sglang"]


def test_every_field_the_prefill_sent_reaches_the_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through aiobootstrap alone, field by field: what 0.5.23's ``register_to_bootstrap`` sent with every added
    field away from its default is what its decode's ``PrefillServerInfo`` holds; a mid-2026 prefill's
    reply carries none of them (an older decode's ``PrefillServerInfo(**reply)`` would raise on one)."""
    with aiobootstrap_prefill_server() as addr:
        register_deployment(monkeypatch, addr, RELEASE_DSV4)
        manager = decode_manager(DECODES["TP 2, rank 1"], RELEASE_DSV4)
        assert manager.try_ensure_parallel_info(addr)
        info = manager.prefill_info_table[addr]
        assert {field: getattr(info, field) for field in RELEASE_DSV4} == RELEASE_DSV4
    with aiobootstrap_prefill_server() as addr:
        for tp_rank in (0, 1):
            assert ask(addr, "PUT", "/route", body(tp_rank, MID_2026)).status == 200
        reply = ask(addr, "GET", ALL)
        assert reply.status == 200
        assert set(reply.body) & set(RELEASE_DEFAULTS) == set()
