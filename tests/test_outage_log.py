"""A Redis outage in the log (issue 19, item 5): a WARNING when it begins, an INFO when it ends, and
the writes it refused counted in one line per interval, not one line each nor none."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from aiobootstrap import ServerConfig, create_app
from aiobootstrap._logging import RateLimited
from aiobootstrap.server.errors import STORE_REFUSALS
from testbed.redis_server import RedisServer

from .helpers.registry import registration
from .helpers.waits import until


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


async def test_the_next_interval_s_line_counts_the_refusals_held_back(
    aiohttp_client: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Refusals within an interval are counted into the next interval's line (here an interval of 0.2 s)."""
    caplog.set_level(logging.INFO, logger="aiobootstrap")
    app = create_app(ServerConfig(store=redis_server.url))
    app[STORE_REFUSALS] = RateLimited(logging.getLogger("aiobootstrap"), 0.2)
    client = await aiohttp_client(app)
    redis_server.kill()
    for rank in range(3):
        assert (await client.put("/register_transfer_engine_info", json=registration(rank))).status == 503
    await asyncio.sleep(0.25)  # the interval runs out
    assert (await client.put("/register_transfer_engine_info", json=registration(3))).status == 503
    refusals = lines(caplog, logging.WARNING, "Refused a write")
    assert len(refusals) == 2, refusals
    assert refusals[1].endswith("(and 2 times more since the last such message)")
