"""A Redis outage in the log (issue 19, item 5): a WARNING when it begins, an INFO when it ends, and
the writes it refused counted in one line per interval, not one line each nor none."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app

from .conftest import registration, until
from .redis_server import RedisServer


def lines(caplog: pytest.LogCaptureFixture, level: int, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level and text in r.getMessage()]


async def test_an_outage_is_a_warning_its_end_info_and_refusals_are_counted(
    aiohttp_client: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis killed: the feed's WARNING, one WARNING for three refused registrations; back: the feed's INFO."""
    caplog.set_level(logging.INFO, logger="aiobootstrap")
    client = await aiohttp_client(create_app(ServerConfig(store=redis_server.url)))
    redis_server.kill()
    for rank in range(3):
        refused = await client.put("/register_transfer_engine_info", json=registration(rank))
        assert refused.status == 503
    await until(lambda: bool(lines(caplog, logging.WARNING, "the change feed broke")))
    refusals = lines(caplog, logging.WARNING, "Refused a write")
    assert len(refusals) == 1, refusals
    assert "(PUT /register_transfer_engine_info) with 503: Redis at" in refusals[0]
    assert not lines(caplog, logging.INFO, "the change feed broke")
    redis_server.start()
    await until(lambda: bool(lines(caplog, logging.INFO, "is back")))
