"""The JSON codec: orjson when installed, the stdlib otherwise, and the same JSON either way."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from aiobootstrap import _json
from aiobootstrap.exceptions import BadRequest
from aiobootstrap.server.faces import records
from aiobootstrap.store import Record
from aiobootstrap.wire.bodies import engine_info_body, parse_body
from aiobootstrap.wire.results import encode_items

from .helpers.registry import info_key

orjson = pytest.importorskip("orjson", reason="the fast extra is not installed")

DOCUMENTS: list[Any] = [
    {"rank": 0, "transfer_engine_info": {"session_id": "10.0.0.7:18000", "weights_info_dict": {}}},
    {"w": {"layers.0.mlp.weight": [140234567890123, 8388608, 2], "scale": 0.5, "neg": -3}},
    {"unicode": "héllo → 世界 🚀", "escapes": 'quote " backslash \\ newline \n tab \t \x00'},
    {"floats": [0.1, 1e-300, 1.7976931348623157e308, -0.0, 1e16, 123456.789]},
    {"u64": 18446744073709551615, "i64": -9223372036854775808, "nested": [[[{"a": [None, True]}]]]},
    [],
    "plain string",
    42,
]


@pytest.fixture(params=["orjson", "stdlib"])
def codec(request, monkeypatch):
    """Run a test once with orjson and once as if it were not installed."""
    if request.param == "stdlib":
        monkeypatch.setattr(_json, "orjson", None)
    return request.param


@pytest.mark.parametrize("document", DOCUMENTS)
def test_dumps_is_compact_json_equal_to_the_stdlib(codec, document):
    """dumps writes JSON that parses back to the same value the stdlib's encoding does."""
    encoded = _json.dumps(document)
    assert json.loads(encoded) == document
    assert json.loads(encoded) == json.loads(json.dumps(document))


@pytest.mark.parametrize("document", DOCUMENTS)
def test_loads_reads_what_the_stdlib_reads(codec, document):
    """loads of the stdlib's encoding gives the same value as json.loads."""
    text = json.dumps(document).encode()
    assert _json.loads(text) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    [b"18446744073709551616", b'{"big": -9223372036854775809}', b'{"id": 123456789012345678901234567890}'],
)
def test_integers_past_64_bits_stay_exact_integers(codec, text):
    """An integer orjson would read as a float is read exactly, as the stdlib does."""
    value = _json.loads(text)
    assert value == json.loads(text)
    assert _json.dumps(value) == json.dumps(value, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b'"\\ud800"', "\ud800"),  # a lone surrogate, which orjson refuses
        (b"\xef\xbb\xbf{}", {}),  # a UTF-8 byte order mark
        ('{"a": 1}'.encode("utf-16"), {"a": 1}),
    ],
)
def test_loads_falls_back_to_the_stdlib_for_what_orjson_refuses(codec, text, expected):
    """Input the stdlib accepts and orjson does not still parses, to the same value."""
    assert _json.loads(text) == expected


@pytest.mark.parametrize("text", [b"NaN", b'{"a": Infinity}', b"[-Infinity]", b"{", b"\xff"])
def test_loads_still_refuses_what_is_not_json(codec, text):
    """NaN, Infinity and broken input raise ValueError with either codec."""
    with pytest.raises(ValueError):  # noqa: PT011 - the one type parse_body catches
        _json.loads(text)


@pytest.mark.parametrize(
    "document",
    [{"s": "\udc80 lone"}, {"n": 1 << 70}, {1: "int key"}],
)
def test_dumps_handles_what_orjson_refuses(codec, document):
    """Lone surrogates, huge ints and int keys encode exactly as the stdlib does."""
    assert _json.dumps(document) == json.dumps(document, separators=(",", ":")).encode()


def test_registration_body_keeps_nan_invalid(codec):
    """A NaN the caller passes stays NaN on the wire (which the server refuses), never null."""
    body = engine_info_body(0, "s", {"x": float("nan")})
    assert b"NaN" in body
    with pytest.raises(BadRequest, match="not valid JSON"):
        parse_body(body)


def test_get_and_batch_replies_are_equal_with_both_codecs(monkeypatch):
    """A record's reply and a batch reply parse to the same JSON whichever codec built them."""
    weights = {f"layers.{i}.weight": [1 << 40, i, 2] for i in range(50)} | {"名": "値"}
    record = Record(info_key(3), {"session_id": "10.0.0.7:18000", "weights_info_dict": weights}, 7, 0.0)
    fast = records.encode_info(record)
    monkeypatch.setattr(_json, "orjson", None)
    slow = records.encode_info(record)
    assert json.loads(fast) == json.loads(slow)
    assert json.loads(fast)["remote_instance_transfer_engine_info"] == ["10.0.0.7:18000", weights]
    batch = encode_items("infos", [fast], 9)
    assert json.loads(batch) == {"infos": [json.loads(slow)], "version": 9}


def test_dumps_returns_right_sized_bytes(codec):
    """A small reply holds little more memory than its length: the registry keeps one per rank."""
    document = {"rank": 1, "remote_instance_transfer_engine_info": ["s", {"w": [1, 2, 3]}], "version": 1}
    tracemalloc.start()
    try:
        encoded = _json.dumps(document)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < len(encoded) + 512
