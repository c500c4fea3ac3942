"""The bring-up page (SPEC section 11) in a real browser, Debian's Chromium driven by Playwright: the
grid of ranks (at 8, 4,096 and 65,536), following registrations, deletions and expiries, the namespace
picker, a lost server, the token prompt, light and dark; and docs/page.png, the screenshot of it all
(the waits and encoder health it shows are ``test_page_looks``'). How: ``page_browser``."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest

from aiobootstrap import BootstrapClient, BootstrapServer
from aiobootstrap.server.faces.encoders.settings import EncoderSettings
from aiobootstrap.server.tokens import TokenSet
from testbed.redis_server import free_port

from . import page_browser
from .page_browser import (
    LOOKED,
    SHOWN,
    SKIP,
    Encoder,
    cell_says,
    count,
    encoder_says,
    hover,
    open_page,
    screenshot,
    text_in,
    title_has,
)

pytestmark = SKIP
# The fixtures, asked for by name.
browser, server, screenshots = page_browser.browser, page_browser.server, page_browser.screenshots


async def test_the_page_renders_every_rank_and_follows_a_registration_and_a_deletion(
    browser, server, screenshots
):
    """8 cells for world size 8, all missing; a registration turns rank 3 registered, a deletion back.

    And the page asks nothing of any host but the server (Playwright's request log)."""
    page, requested = await open_page(browser, server.url + "/")
    await cell_says(page, 7, "missing")
    assert await count(page, "#groups section:first-child [data-rank]") == 8
    await text_in(page, "#conn", "live")
    async with BootstrapClient(server.url) as client:
        await client.register(3, session_id="10.0.0.7:18000", weights_info_dict={})
        await cell_says(page, 3, "registered")
        await page.wait_for_function(
            "() => document.querySelector('[data-rank=\"3\"]').title.includes('session 10.0.0.7:18000')",
            timeout=SHOWN,
        )
        await text_in(page, "#groups .counts", "1 registered of world size 8")
        symbols = await page.evaluate(
            "() => ['3', '4'].map(r => document.querySelector(`[data-rank='${r}']`).textContent)"
        )
        assert symbols[0] != symbols[1], "a state is a symbol too, not only a colour"
        await client.unregister(3)
        await cell_says(page, 3, "missing")
        await client.register_encoder_url("http://10.0.0.9:8000")
        await text_in(page, "#encoder-list", "http://10.0.0.9:8000")
        await text_in(page, "#encoder-count", "1 encoder URL listed")
    assert all(url.startswith(server.url) or url.startswith("data:") for url in requested), requested
    await screenshot(page, "page-8.png", screenshots)
    await page.context.close()


async def test_a_lease_expiry_turns_the_cell_missing(browser, server):
    """A rank on a 3-second lease that nobody keeps alive: on a lease running out, then missing once it expires."""
    page, _ = await open_page(browser, server.url + "/")
    await text_in(page, "#conn", "live")
    info = {"session_id": "leased", "weights_info_dict": {}}
    async with aiohttp.ClientSession() as http:
        async with http.post(server.url + "/leases", json={"ttl": 3}) as reply:
            lease = (await reply.json())["lease"]
        body = {"rank": 5, "transfer_engine_info": info, "lease": lease}
        async with http.put(server.url + "/register_transfer_engine_info", json=body) as reply:
            assert reply.status == 200
    await cell_says(page, 5, "lease running out")
    assert await page.evaluate("() => document.querySelector('[data-rank=\"5\"]').textContent") == "!"
    await cell_says(page, 5, "missing")
    await page.context.close()


async def test_a_page_opened_late_into_a_lease_shows_it_running_out(browser, server):
    """A page opened past half of a lease's TTL shows it running out from the first draw: the server sends
    the TTL (the page coloured a lease by the largest remaining time it had seen, so it showed green a
    dead worker's lease opened late into it)."""
    info = {"session_id": "late", "weights_info_dict": {}}
    async with aiohttp.ClientSession() as http:
        async with http.post(server.url + "/leases", json={"ttl": 8}) as reply:
            lease = (await reply.json())["lease"]
        body = {"rank": 6, "transfer_engine_info": info, "lease": lease}
        async with http.put(server.url + "/register_transfer_engine_info", json=body) as reply:
            assert reply.status == 200
        await asyncio.sleep(4.2)  # past half of the TTL: the state itself is a matter of time
        async with http.get(server.url + "/ranks") as reply:
            (rank,) = (await reply.json())["ranks"]
    assert (rank["lease_ttl"], rank["lease_remaining"] < 4) == (8, True)
    page, _ = await open_page(browser, server.url + "/")
    title = await (
        await page.wait_for_function(  # the first draw that knows the lease
            """() => { const cell = document.querySelector('[data-rank="6"]');
                       return cell && cell.title.includes(" s left") && cell.title; }""",
            timeout=SHOWN,
        )
    ).json_value()
    # Shown with more than the old rule's half of what remained at load (about 1.9 s) still to go.
    assert title.startswith("rank 6: lease running out"), title
    assert " s left of 8 s" in title, title
    await page.context.close()


async def test_the_namespace_picker_lists_and_opens_namespaces(browser, server):
    """The picker names the namespaces /namespaces lists; choosing one opens /ns/NAME/ and its grid; a new
    role gets a grid of its own, live."""
    async with BootstrapClient(server.url, namespace="team-a") as client:
        await client.register(2, session_id="a2", weights_info_dict={})
    page, _ = await open_page(browser, server.url + "/")
    await page.wait_for_function(
        "() => [...document.querySelectorAll('#ns option')].some(o => o.value === 'team-a')", timeout=SHOWN
    )
    await page.select_option("#ns", "team-a")
    await page.wait_for_url("**/ns/team-a/", timeout=SHOWN)
    await cell_says(page, 2, "registered")
    await cell_says(page, 0, "missing")
    async with BootstrapClient(
        server.url, namespace="team-a"
    ) as client:  # a role of its own: a grid of its own
        await client.register(4, session_id="d4", weights_info_dict={}, role="draft")
    await text_in(page, "#groups section:nth-child(2) h2", "transfer_engine_info · draft")
    await cell_says(page, 4, "registered", section=1)
    await page.context.close()


async def test_a_lost_server_is_said_and_the_page_catches_up_when_it_is_back(browser):
    """A server stopped: the banner says lost; a new one on the same port: back, with what it holds."""
    first = BootstrapServer(host="127.0.0.1", port=0, world_size=4)
    await first.start()
    port = first.port
    page, _ = await open_page(browser, first.url + "/")
    await text_in(page, "#conn", "live")
    await first.close()
    await text_in(page, "#conn", "lost the server")
    async with BootstrapServer(host="127.0.0.1", port=port, world_size=4) as second:
        async with BootstrapClient(second.url) as client:
            await client.register(1, session_id="after the restart", weights_info_dict={})
        await text_in(page, "#conn", "back")
        await cell_says(page, 1, "registered")
        await page.context.close()


async def test_the_token_is_asked_once_and_kept_out_of_urls_and_logs(browser, caplog):
    """With tokens, the page asks for one (a 401 page; a wrong one is refused with the server's detail), then
    reads with it: asked once, never in a URL or the access log."""
    secret = "page-token-s3cret"
    tokens = TokenSet.parse(f"{secret}\n")
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    async with BootstrapServer(
        host="127.0.0.1", port=0, world_size=2, auth_tokens=tokens, access_log=True
    ) as served:
        page, requested = await open_page(browser, served.url + "/")
        await page.wait_for_selector("#token-form:not([hidden])", timeout=SHOWN)
        await page.fill("#token", "not-the-token")  # refused: the server's detail, and the form again
        await page.click("#token-form button")
        await text_in(page, "#token-error", "not valid")
        await page.wait_for_selector("#token-form:not([hidden])", timeout=SHOWN)
        await page.fill("#token", secret)
        await page.click("#token-form button")
        await cell_says(page, 0, "missing")
        await text_in(page, "#conn", "live")
        await page.reload()  # asked once: kept for the tab
        await cell_says(page, 1, "missing")
        assert await page.evaluate("() => document.querySelector('#token-form').hidden")
        assert secret not in page.url
        assert not any(secret in url for url in requested)
        assert "GET /ranks" in caplog.text  # the access log was on, and saw the page's reads
        assert secret not in caplog.text
        await page.context.close()


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
async def test_light_and_dark_both_render(browser, dark, screenshots):
    """The page follows prefers-color-scheme: background, text and a registered cell differ in each."""
    async with BootstrapServer(host="127.0.0.1", port=0, world_size=64) as served:
        async with BootstrapClient(served.url) as client:
            for rank in range(0, 64, 3):
                await client.register(rank, session_id=f"s{rank}", weights_info_dict={})
        page, _ = await open_page(browser, served.url + "/", dark=dark, height=260)  # docs/page.png's size
        await cell_says(page, 3, "registered")
        background, cell, text = await page.evaluate(
            """() => [getComputedStyle(document.body).backgroundColor,
                      getComputedStyle(document.querySelector('[data-rank="3"]')).backgroundColor,
                      getComputedStyle(document.body).color]"""
        )
        assert len({background, cell, text}) == 3
        assert (background == "rgb(21, 22, 20)") is dark
        await hover(page, 3)
        await screenshot(page, f"page-64-{'dark' if dark else 'light'}.png", screenshots)
        await page.context.close()


async def test_4096_ranks_render_and_follow(browser, screenshots):
    """At 4,096 ranks (half registered) every rank is a cell, and one more registration shows; a wait
    parked on a missing rank marks it (docs/page-4096.png, the whole page)."""
    async with BootstrapServer(host="127.0.0.1", port=0, world_size=4096) as served:
        async with BootstrapClient(served.url) as client:
            await asyncio.gather(
                *(
                    client.register(rank, session_id=f"s{rank}", weights_info_dict={})
                    for rank in range(0, 4096, 2)
                )
            )
            page, _ = await open_page(browser, served.url + "/")
            await cell_says(page, 4094, "registered")
            assert await count(page, "#groups section:first-child [data-rank]") == 4096
            await client.register(4095, session_id="last", weights_info_dict={})
            await cell_says(page, 4095, "registered")
            waiter = asyncio.create_task(client.get(1001, timeout=60))
            await title_has(page, 1001, "1 wait parked on it")
            await hover(page, 1001)
            await screenshot(page, "page-4096.png", screenshots, full_page=True)
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
        await page.context.close()


async def test_65536_ranks_are_drawn_as_runs(browser):
    """At 65,536 ranks the grid is runs of ranks in one state, not 65,536 elements, and still follows."""
    async with BootstrapServer(host="127.0.0.1", port=0, world_size=65536) as served:
        page, _ = await open_page(browser, served.url + "/")
        await page.wait_for_function(
            "() => document.querySelector('#groups .run')?.title === 'ranks 0-65535: missing (65536)'",
            timeout=SHOWN,
        )
        async with BootstrapClient(served.url) as client:
            await client.register(40000, session_id="s", weights_info_dict={})
        await page.wait_for_function(
            "() => [...document.querySelectorAll('#groups .run')].some(r => r.title.startsWith('rank 40000: registered'))",
            timeout=SHOWN,
        )
        assert await count(page, "#groups section:first-child .run") == 3
        async with BootstrapClient(served.url) as client:
            waiter = asyncio.create_task(client.get(50000, timeout=60))
            await page.wait_for_function(
                "() => [...document.querySelectorAll('#groups .run')].some(r => "
                "r.title === 'rank 50000: missing (1), 1 waiting on each')",
                timeout=LOOKED,
            )
            assert await count(page, "#groups section:first-child .run") == 5
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
        await page.context.close()


async def test_the_screenshot_of_64_ranks(browser, screenshots):
    """docs/page.png, made true by the run: 64 ranks, most registered, some missing, one on a lease running
    out, waits parked on two missing ranks, one encoder URL healthy and one evicted; rank 45 hovered."""
    dead = f"http://127.0.0.1:{free_port()}"
    async with (
        Encoder() as encoder,
        BootstrapServer(
            host="127.0.0.1",
            port=0,
            world_size=64,
            settings=(EncoderSettings(encoder_health_interval=0.5, encoder_health_timeout=0.5),),
        ) as served,
        BootstrapClient(served.url) as client,
    ):
        missing = {7, 19, 23, 41, 44, 45, 50, 51, 52, 53, 58, 63}
        await asyncio.gather(
            *(
                client.register(rank, session_id=f"10.0.0.{rank}:18000", weights_info_dict={})
                for rank in range(64)
                if rank not in missing
            )
        )
        for url in (encoder.url, dead):
            await client.register_encoder_url(url)
        async with aiohttp.ClientSession() as http:
            async with http.post(served.url + "/leases", json={"ttl": 8}) as reply:
                lease = (await reply.json())["lease"]
            info = {"session_id": "10.0.0.41:18000", "weights_info_dict": {}}
            body = {"rank": 41, "transfer_engine_info": info, "lease": lease}
            async with http.put(served.url + "/register_transfer_engine_info", json=body) as reply:
                assert reply.status == 200
        waiters = [asyncio.create_task(client.get(rank, timeout=60)) for rank in (45, 45, 50)]
        page, _ = await open_page(browser, served.url + "/", height=300)
        await title_has(page, 45, "2 waits parked on it")
        await title_has(page, 50, "1 wait parked on it")
        await encoder_says(page, dead, "evicted", "evicted since")
        await encoder_says(page, encoder.url, "healthy")
        await cell_says(page, 41, "lease running out", timeout=SHOWN + 4_000)  # half of its 8 s
        await hover(page, 45)
        await screenshot(page, "page.png", screenshots, full_page=True)
        for task in waiters:
            task.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        await page.context.close()
