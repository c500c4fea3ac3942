"""The protocol module reads what it writes, and tells a rank's 404 from any other."""

from __future__ import annotations

from typing import Any

import pytest

from aiobootstrap import UnexpectedReply, _json
from aiobootstrap.wire.bodies import (
    config_body,
    engine_info_body,
    field_of,
    parse_body,
    parse_engine_info,
    parse_rank_field,
    parse_role_field,
    parse_role_param,
    parse_url_body,
    url_body,
)
from aiobootstrap.wire.errors import decode_absent, decode_not_registered, encode_not_registered
from aiobootstrap.wire.params import (
    batch_query,
    get_query,
    listing_query,
    parse_after,
    parse_form,
    parse_rank_param,
    parse_ranks,
    parse_seconds,
    parse_wait,
    rank_query,
    record_query,
    records_query,
    role_rank_query,
    split_rank_specs,
)
from aiobootstrap.wire.results import (
    decode_batch,
    decode_config,
    decode_config_batch,
    decode_encoder_urls,
    decode_info,
    decode_listing,
)
from aiobootstrap.wire.routes import BATCH_QUERY_CHARS


@pytest.mark.parametrize(
    ("status", "body", "missing"),
    [
        (404, b'{"detail": "No transfer engine info for rank 3", "missing": [3]}', [3]),
        (404, b'{"detail": "No transfer engine info for ranks 1-2", "missing": [1, 2]}', [1, 2]),
        (404, b'{"detail": "No transfer engine info for rank 7"}', [7]),
        (404, b'{"detail": "No transfer engine info for rank 7 (stale)"}', None),
        (404, b'{"detail": "Not Found"}', None),
        (404, b"<html>404 Not Found</html>", None),
        (404, b'{"missing": [true]}', None),
        (404, b"[3]", None),
        (400, b'{"detail": "No transfer engine info for rank 7", "missing": [7]}', None),
    ],
)
def test_only_a_rank_404_reads_as_not_registered(status: int, body: bytes, missing: list[int] | None) -> None:
    """A 404 means "not registered" by its "missing" field or SPEC's exact sentence; nothing else does."""
    assert decode_not_registered(status, body) == missing


def test_a_not_registered_reply_reads_back_as_its_ranks() -> None:
    """What the server writes for missing ranks, the client reads back as those ranks."""
    body = encode_not_registered([0, 1, 2, 9])
    assert decode_not_registered(404, body) == [0, 1, 2, 9]
    assert _json.loads(body)["detail"] == "No transfer engine info for ranks 0-2,9"


@pytest.mark.parametrize("body", [b"<html>", b"{}", b'{"infos": 3}', b'{"rank": "x"}'])
def test_a_reply_that_is_not_the_protocols_is_an_unexpected_reply(body: bytes) -> None:
    """A 200 whose body is not a get, batch or listing reply raises UnexpectedReply, not ValueError."""
    with pytest.raises(UnexpectedReply):
        decode_info(body, 0)
    with pytest.raises(UnexpectedReply):
        decode_batch(body, [0])
    with pytest.raises(UnexpectedReply):
        decode_listing(body)


@pytest.mark.parametrize(("text", "seconds"), [("0", 0.0), ("2.5", 2.5), (".5", 0.5), ("1e1", 10.0)])
def test_seconds_are_read_one_way(text: str, seconds: float) -> None:
    """Plain decimal seconds are read alike by wait= and the tools' options."""
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "1e400", "1_0", " 1", "+1", "\u0663", ""])
def test_seconds_refuse_what_float_alone_would_take(text: str) -> None:
    """Negative, non-finite and non-ASCII-decimal seconds are refused by the one reader."""
    assert parse_seconds(text) is None


def test_the_queries_the_client_writes_are_the_ones_the_server_reads() -> None:
    """get, batch and delete queries parse back to what was asked, and split specs cover every rank."""
    query = get_query(3, 7, 1.5)
    assert parse_rank_param(query["rank"]) == 3
    assert parse_after(query["after"]) == 7
    assert parse_wait(query["wait"]) == 1.5
    assert parse_rank_param(rank_query(9)["rank"]) == 9
    ranks = list(range(0, 6000, 2))
    specs = split_rank_specs(ranks)
    assert len(specs) > 1
    assert all(len(spec) <= BATCH_QUERY_CHARS for spec in specs)
    read = [rank for spec in specs for rank in parse_ranks(batch_query(spec, 0, 0)["ranks"])]
    assert read == ranks


@pytest.mark.parametrize(
    ("status", "body", "noun", "missing"),
    [
        (404, b'{"detail": "No parallelism config for rank 3", "missing": [3]}', "parallelism config", [3]),
        (404, b'{"detail": "No parallelism config for rank 7"}', "parallelism config", [7]),
        (404, b'{"detail": "No parallelism config for rank 7"}', "transfer engine info", None),
        (404, b'{"detail": "No transfer engine info for rank 7"}', "parallelism config", [7]),
        (404, b'{"detail": "No parallelism config for rank x"}', "parallelism config", None),
        (404, b'{"detail": "Not Found"}', "parallelism config", None),
        (400, b'{"detail": "No parallelism config for rank 7"}', "parallelism config", None),
    ],
)
def test_a_kinds_404_reads_as_not_registered(
    status: int, body: bytes, noun: str, missing: list[int] | None
) -> None:
    """A kind's 404 is told by "missing" or by the exact sentence of that kind (an old server's)."""
    assert decode_absent(status, body, noun) == missing


def _config(body: bytes) -> Any:
    return decode_config(body, 0, "1")


def _config_batch(body: bytes) -> Any:
    return decode_config_batch(body, [0])


@pytest.mark.parametrize(
    ("decode", "body"),
    [
        (_config, b"<html>"),
        (_config, b"[1]"),
        (_config_batch, b'{"configs": 3}'),
        (_config_batch, b'{"configs": [{"rank": 0}]}'),
        (decode_encoder_urls, b"[]"),
        (decode_encoder_urls, b'{"encoder_urls": [1]}'),
        (decode_encoder_urls, b'{"encoder_urls": [], "version": -1}'),
    ],
)
def test_a_kinds_reply_that_is_not_the_protocols_is_an_unexpected_reply(decode: Any, body: bytes) -> None:
    """Config, config batch and encoder list decoders raise UnexpectedReply on what the protocol does not allow."""
    with pytest.raises(UnexpectedReply):
        decode(body)


def test_the_kinds_queries_and_bodies_are_the_ones_the_server_reads() -> None:
    """Roles, form=object and encoder bodies parse back; the default role is not sent at all."""
    assert "role" not in record_query(3, 0, 1.0, role="target")
    query = record_query(3, 0, 1.0, role="draft", whole=True)
    assert (parse_role_param(query["role"]), parse_form(query["form"])) == ("draft", True)
    assert records_query("0-3", 0, 0.0, role="draft")["role"] == "draft"
    assert role_rank_query(2, "draft") == {"rank": "2", "role": "draft"}
    assert listing_query("transfer_engine_info", "target") == {}
    assert parse_url_body(url_body("http://e:1")) == "http://e:1"
    body = parse_body(config_body(1, {"tp": 2}, "draft"))
    assert (parse_rank_field(body), parse_role_field(body)) == (1, "draft")
    tagged = parse_body(engine_info_body(0, None, {}, {"backend": "nixl"}))
    info = parse_engine_info(field_of(tagged, "transfer_engine_info"))
    assert info == {"backend": "nixl", "weights_info_dict": {}}


def test_an_older_servers_listing_is_transfer_engine_info_of_the_target() -> None:
    """A listing without kind or role (an older server) reads as transfer-engine info, role target."""
    body = b'{"version": 1, "world_size": null, "missing": null, "ranks": [{"rank": 0, "session_id": "s", "version": 1, "registered_at": 0, "age": 1}]}'
    listing = decode_listing(body)
    assert (listing.kind, listing.role, listing.ranks[0].session_id) == (
        "transfer_engine_info",
        "target",
        "s",
    )
