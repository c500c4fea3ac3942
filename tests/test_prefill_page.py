"""The bring-up page in a real browser: the fields a prefill deployment's decode gets back beside the
topology (SGLang 0.5.23's decode_allocation_policy, prefill_http_port...), under its grid's count."""

from __future__ import annotations

from typing import Any

import aiohttp

from . import page_browser
from .helpers.prefill import rank_body
from .page_browser import SKIP, open_page, text_in

pytestmark = SKIP
browser, server = page_browser.browser, page_browser.server


async def test_the_page_shows_the_fields_decode_reads(browser, server):
    base = server.url + "/ns/pd-fields"
    fields: dict[str, Any] = {
        "decode_allocation_policy": "prefill_complete",
        "prefill_http_port": 30000,
        "kv_layout": None,
    }
    async with aiohttp.ClientSession() as http:
        async with http.put(base + "/route", json=rank_body(0, 0, tp_size=1, dp_size=1, **fields)) as reply:
            assert reply.status == 200
        page, _ = await open_page(browser, base + "/")
        await text_in(page, "#prefill-count", "1 of 1 rank registered (dp 1 x cp 1 x tp 1 x pp 1): complete")
        await text_in(
            page,
            "#prefill-fields",
            'decode also reads: decode_allocation_policy "prefill_complete", prefill_http_port 30000',
        )
