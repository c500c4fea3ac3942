"""The bring-up page in a real browser: a namespace's vLLM workers, by dp rank, each one's engine and
side channel, following registrations and a restarted worker's new address."""

from __future__ import annotations

from typing import Any

import aiohttp

from . import page_browser
from .page_browser import SKIP, open_page, text_in

pytestmark = SKIP
browser, server = page_browser.browser, page_browser.server


def worker(tp: int, port: int, dp: int = 0) -> dict[str, Any]:
    return {
        "engine_id": "uuid-1",
        "dp_rank": dp,
        "tp_rank": tp,
        "pp_rank": 0,
        "addr": f"tcp://10.0.0.7:{port}",
    }


async def test_the_vllm_workers_are_listed_and_follow(browser: Any, server: Any) -> None:
    base = server.url + "/ns/vllm"
    async with aiohttp.ClientSession() as http:
        for body in (worker(0, 5000), worker(1, 5001)):
            async with http.post(base + "/register", json=body) as reply:
                assert reply.status == 200
        page, _ = await open_page(browser, base + "/")
        await text_in(page, "#vllm-count", "2 workers on 1 dp rank (not probed: --vllm-probe-interval)")
        await text_in(page, "#vllm-list", "✓ dp0-tp1-pp0 — tcp://10.0.0.7:5001, engine uuid-1")
        for body in (worker(1, 6001), worker(0, 5100, dp=1)):  # a restart at a new address, another dp rank
            async with http.post(base + "/register", json=body) as reply:
                assert reply.status == 200
        await text_in(page, "#vllm-list", "✓ dp0-tp1-pp0 — tcp://10.0.0.7:6001")
        await text_in(page, "#vllm-count", "3 workers on 2 dp ranks")
        assert await page.is_hidden("#mooncake")  # another face's section stays hidden: nothing of it here
        groups = await page.text_content("#groups") or ""
        assert "undefined" not in groups  # named records are no rank's: no group of them
        assert "vllm" not in groups
        await page.context.close()
