"""The access log holds refused requests to a rate: a flood of bad requests cannot fill the disk at the
sender's pace (each was a line of about 300 bytes), while every other answer is still logged."""

from __future__ import annotations

import asyncio
import logging
import re
import time

import aiohttp
import pytest

from aiobootstrap import BootstrapServer
from aiobootstrap.server.access_log import REFUSALS_A_SECOND

SENT = 400
HELD = re.compile(r"^(\d+) refused requests were not logged")


async def test_refused_requests_are_logged_at_most_so_many_a_second(caplog: pytest.LogCaptureFixture) -> None:
    """400 malformed registrations: at most REFUSALS_A_SECOND lines of them a second, the held ones counted
    by a line of their own before the next one let through; 40 polls of a rank not registered yet (404) are each logged."""
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    async with (
        BootstrapServer(host="127.0.0.1", port=0, access_log=True) as served,
        aiohttp.ClientSession() as http,
    ):
        started = time.monotonic()
        for _ in range(SENT):
            async with http.put(served.url + "/register_transfer_engine_info", data=b"{") as reply:
                assert reply.status == 400
        await asyncio.sleep(1.5 / REFUSALS_A_SECOND)  # the next refusal is let through, with the count
        async with http.put(served.url + "/register_transfer_engine_info", data=b"{") as reply:
            assert reply.status == 400
        for _ in range(40):
            async with http.get(served.url + "/get_transfer_engine_info?rank=3") as reply:
                assert reply.status == 404
        elapsed = time.monotonic() - started
    lines = [record.getMessage() for record in caplog.records if record.name == "aiohttp.access"]
    refused = [line for line in lines if '"PUT /register_transfer_engine_info' in line]
    held = [int(match.group(1)) for line in lines if (match := HELD.match(line))]
    assert len(refused) <= REFUSALS_A_SECOND * (elapsed + 1), (len(refused), elapsed)
    assert held, lines[:5]
    assert len(refused) + sum(held) == SENT + 1
    assert len([line for line in lines if '"GET /get_transfer_engine_info?rank=3' in line]) == 40
