"""One rank rule on every route, and ranks an older version stored past it.

A rank is an integer from 0 to 10**18 - 1: a body's JSON integer, a query's
ASCII digits. Every route of every kind, in the default namespace and under
/ns/<name>/, accepts and refuses the same values, so no rank can be stored that
a get, a batch or a delete would refuse.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap.exceptions import TooManyRanks
from aiobootstrap.server.faces.engine_info import kinds as _kinds
from aiobootstrap.store import StoreLimits
from aiobootstrap.store.file import FileStore
from aiobootstrap.store.journal import MAGIC

from .helpers.file_store import line
from .helpers.registry import info_key

Client = TestClient[web.Request, web.Application]

# (id, the rank as a body's JSON value, accepted). A query spells the same
# value as its JSON text: "1" is '"1"', true is 'true', 1.0 is '1.0'.
VALUES: list[tuple[str, Any, bool]] = [
    ("0", 0, True),
    ("10^18-1", 10**18 - 1, True),
    ("10^18", 10**18, False),
    ("2^63", 2**63, False),
    ("-1", -1, False),
    ("string 1", "1", False),
    ("1.0", 1.0, False),
    ("true", True, False),
    ("10^30", 10**30, False),
    ("4001 digits", 10**4000, False),
]


def body_for(kind: _kinds.RecordKind, rank: Any) -> dict[str, Any]:
    value: dict[str, Any] = (
        {"session_id": "s", "weights_info_dict": {}} if kind.name == TRANSFER_ENGINE_INFO else {"tp_size": 8}
    )
    return {"rank": rank, kind.field: value}


@pytest.mark.parametrize("prefix", ["", "/ns/blue"])
@pytest.mark.parametrize("kind", _kinds.KINDS, ids=[kind.name for kind in _kinds.KINDS])
@pytest.mark.parametrize(("value", "accepted"), [(v, a) for _, v, a in VALUES], ids=[i for i, _, _ in VALUES])
async def test_every_route_accepts_and_refuses_the_same_ranks(
    client: Client, prefix: str, kind: _kinds.RecordKind, value: Any, accepted: bool
) -> None:
    """PUT, GET, batch GET and DELETE of each kind, default and namespaced: all 200, or all 400."""
    text = json.dumps(value)
    statuses: dict[str, int] = {}
    async with client.put(prefix + kind.register_path, data=json.dumps(body_for(kind, value))) as reply:
        statuses["put"] = reply.status
    async with client.get(prefix + kind.get_path, params={"rank": text}) as reply:
        statuses["get"] = reply.status
    async with client.get(prefix + kind.batch_path, params={"ranks": text}) as reply:
        statuses["batch"] = reply.status
    async with client.get(prefix + kind.batch_path, params={"ranks": f"0-{text}"}) as reply:
        # As the end of a range: refused alike (0-0 and 0-(10^18-1) are ranges, though too many ranks for one request).
        statuses["range"] = reply.status
    async with client.delete(prefix + kind.register_path, params={"rank": text}) as reply:
        statuses["delete"] = reply.status
    async with client.get(prefix + kind.get_path, params={"rank": text}) as reply:
        statuses["get after delete"] = reply.status
    if accepted:
        expected_range = 200 if value == 0 else 400  # one rank, or far more than one request may name
        assert statuses == {
            "put": 200,
            "get": 200,
            "batch": 200,
            "range": expected_range,
            "delete": 200,
            "get after delete": 404,
        }
    else:
        assert set(statuses.values()) == {400}, statuses


# -- journals written before the rule ---------------------------------------


def put_line(rank: int, version: int) -> bytes:
    return line(
        {
            "op": "put",
            "rank": rank,
            "version": version,
            "at": 1764460800.0 + version,
            "value": {"session_id": f"s{version}", "weights_info_dict": {}},
        }
    )


def write_journal(path: Path, data: bytes) -> None:
    path.write_bytes(data)


async def test_ranks_past_18_digits_in_an_old_journal_are_skipped_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An older version's huge ranks do not load, do not count under max_ranks, keep their versions
    taken, are named in one warning line, and leave the file at the start's compaction."""
    path = tmp_path / "state"
    huge = [10**18, 2**63, 10**30]
    write_journal(
        path,
        MAGIC
        + line({"op": "base", "version": 10})
        + put_line(huge[0], 11)
        + put_line(3, 12)
        + put_line(huge[1], 13)
        + line({"op": "del", "rank": huge[1], "version": 14})
        + put_line(huge[2], 15),
    )
    store = FileStore(str(path), StoreLimits(max_ranks=3))
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        await store.open(_Nobody())
    try:
        warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "skipped 2 registration(s) of ranks past 18 digits" in warnings[0].getMessage()
        assert (store.skipped, store.skipped_ranks) == (0, 2)
        assert [r.rank for r in await store.records("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE)] == [3]
        assert await store.version("default") == 15
        # Three places under --max-ranks 3: rank 3 and two new ranks; the huge ranks hold none.
        await store.put(info_key(4), {"session_id": "s", "weights_info_dict": {}})
        new = await store.put(info_key(5), {"session_id": "s", "weights_info_dict": {}})
        assert new.version == 17
        with pytest.raises(TooManyRanks):
            await store.put(info_key(6), {"session_id": "s", "weights_info_dict": {}})
    finally:
        await store.close()
    text = path.read_bytes()
    assert all(str(rank).encode() not in text for rank in huge)
    caplog.clear()
    again = FileStore(str(path), StoreLimits(max_ranks=3))
    with caplog.at_level(logging.WARNING, logger="aiobootstrap"):
        await again.open(_Nobody())
    try:
        assert not caplog.records
        assert [r.rank for r in await again.records("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE)] == [
            3,
            4,
            5,
        ]
    finally:
        await again.close()


async def test_a_server_on_an_old_journal_with_huge_ranks_takes_real_new_ranks(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """The reported lockout: three huge ranks under --max-ranks 3 no longer keep real ranks out."""
    path = tmp_path / "state"
    write_journal(path, MAGIC + b"".join(put_line(10**18 + n, n + 1) for n in range(3)))
    client = await aiohttp_client(create_app(ServerConfig(state_file=str(path), max_ranks=3)))
    for rank in range(3):
        body = {"rank": rank, "transfer_engine_info": {"session_id": "s", "weights_info_dict": {}}}
        async with client.put("/register_transfer_engine_info", json=body) as reply:
            assert reply.status == 200


class _Nobody:
    def changed(self, changes: Any) -> None:
        pass

    def resync(self) -> None:
        pass
