"""The bring-up page in a real browser: a namespace's prefill deployment as a grid of its dp x cp x tp x pp
ranks, registered or missing, following registrations; a namespace's Mooncake engines, each RPC address
beside its segment."""

from __future__ import annotations

import aiohttp

from . import page_browser
from .helpers.prefill import rank_body
from .page_browser import SHOWN, SKIP, open_page, screenshot, text_in

pytestmark = SKIP
browser, server, screenshots = page_browser.browser, page_browser.server, page_browser.screenshots


async def _cell(page, name: str, state: str) -> None:
    await page.wait_for_function(
        """([name, state]) => { const cell = document.querySelector(`[data-prefill="${name}"]`);
                                return cell != null && cell.title.startsWith(name + ": " + state); }""",
        arg=[name, state],
        timeout=SHOWN,
    )


async def test_the_prefill_grid_shows_who_is_missing_and_follows(browser, server, screenshots):
    base = server.url + "/ns/pd"
    async with aiohttp.ClientSession() as http:
        for tp, dp in ((0, 0), (1, 0), (0, 1)):
            async with http.put(base + "/route", json=rank_body(tp, dp)) as reply:
                assert reply.status == 200
        async with http.put(base + "/metadata?key=mooncake/ram/a", data=b"{}") as reply:
            assert reply.status == 200
        page, _ = await open_page(browser, base + "/")
        await text_in(page, "#conn", "live")
        await text_in(
            page, "#prefill-count", "3 of 4 ranks registered (dp 2 x cp 1 x tp 2 x pp 1): 1 missing"
        )
        await _cell(page, "dp1-cp0-tp1-pp0", "missing")
        await _cell(page, "dp0-cp0-tp1-pp0", "registered, 10.0.0.11:17001")
        await screenshot(page, "page-prefill.png", screenshots)  # docs/operations.md's, by make screenshots
        async with http.put(base + "/route", json=rank_body(1, 1)) as reply:
            assert reply.status == 200
        await _cell(page, "dp1-cp0-tp1-pp0", "registered")
        await text_in(page, "#prefill-count", "4 of 4 ranks registered (dp 2 x cp 1 x tp 2 x pp 1): complete")
        groups = await page.text_content("#groups") or ""
        # Named records are no rank's: no group of them ("prefill_rank, role undefined" before).
        assert "undefined" not in groups
        assert "prefill_rank" not in groups
        assert "metadata" not in groups
        await page.context.close()


async def test_the_mooncake_engines_are_listed_and_follow(browser, server):
    """Each engine's RPC address beside its segment, and an engine that registers later added live."""
    base = server.url + "/ns/mc"
    async with aiohttp.ClientSession() as http:
        for key, value in (
            ("mooncake/rpc_meta/h:1", b'{"ip_or_host_name":"10.0.0.7","rpc_port":15868}'),
            ("mooncake/ram/h:1", b'{"protocol":"tcp","buffers":[{"addr":1}]}'),
        ):
            async with http.put(f"{base}/metadata?key={key}", data=value) as reply:
                assert reply.status == 200
        page, _ = await open_page(browser, base + "/")
        await text_in(page, "#mooncake-count", "1 engine, 2 keys")
        await text_in(page, "#mooncake-list", "✓ h:1 — RPC 10.0.0.7:15868, segment, 1 buffer (tcp)")
        async with http.put(
            f"{base}/metadata?key=mooncake/rpc_meta/h:2", data=b'{"ip_or_host_name":"h","rpc_port":2}'
        ) as reply:
            assert reply.status == 200
        await text_in(page, "#mooncake-list", "• h:2 — RPC h:2, no segment yet")
        await page.context.close()
