"""The bring-up page in a real browser: what it shows besides the records, the waits parked on each
rank and the encoder URLs' health, following both. How: ``page_browser``."""

from __future__ import annotations

import asyncio

from aiobootstrap import BootstrapClient, BootstrapServer
from aiobootstrap.server.faces.encoders.settings import EncoderSettings

from . import page_browser
from .page_browser import (
    SHOWN,
    SKIP,
    Encoder,
    encoder_says,
    open_page,
    text_in,
    title_has,
)

pytestmark = SKIP
# The fixtures, asked for by name.
browser, server, screenshots = page_browser.browser, page_browser.server, page_browser.screenshots


async def test_waiters_are_shown_on_their_ranks_and_follow_parks_and_leaves(browser, server):
    """A get parked on rank 3 marks its cell (a digit and a marker, and the title); a second makes it 2;
    both leaving unmark it. Nothing changes in the records: the page sees it by looking again."""
    page, _ = await open_page(browser, server.url + "/")
    await text_in(page, "#conn", "live")
    async with BootstrapClient(server.url) as client:
        first = asyncio.create_task(client.get(3, timeout=60))
        await title_has(page, 3, "1 wait parked on it")
        assert await page.evaluate("() => document.querySelector('[data-rank=\"3\"]').textContent") == "1"
        assert await page.evaluate(
            "() => document.querySelector('[data-rank=\"3\"]').classList.contains('waited')"
        )
        await title_has(page, 4, "parked", present=False)
        second = asyncio.create_task(client.get(3, timeout=60))
        await title_has(page, 3, "2 waits parked on it")
        for task in (first, second):
            task.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
        await title_has(page, 3, "parked", present=False)
        assert await page.evaluate("() => document.querySelector('[data-rank=\"3\"]').textContent") == "·"
    await page.context.close()


async def test_an_encoder_not_probed_yet_is_not_shown_healthy(browser):
    """A URL listed since the last round says it was not probed yet; it was shown "✓ healthy (answering
    /health)" before any probe had asked it."""
    async with (
        Encoder() as encoder,
        BootstrapServer(
            host="127.0.0.1", port=0, settings=(EncoderSettings(encoder_health_interval=3600),)
        ) as served,
    ):
        async with BootstrapClient(served.url) as client:
            await client.register_encoder_url(encoder.url)
        page, _ = await open_page(browser, served.url + "/")
        await encoder_says(page, encoder.url, "listed", "not probed yet")
        assert "healthy" not in (await page.text_content("#encoder-list") or "")
        await page.context.close()


async def test_encoder_health_is_shown_and_follows_an_eviction(browser):
    """An encoder answering /health is healthy; made to fail, it is failing (with its count), then evicted
    (since when); answering again, healthy and listed again. Each state a symbol and words."""
    async with (
        Encoder() as encoder,
        BootstrapServer(
            host="127.0.0.1",
            port=0,
            world_size=4,
            settings=(EncoderSettings(encoder_health_interval=1.5, encoder_health_timeout=0.5),),
        ) as served,
    ):
        async with BootstrapClient(served.url) as client:
            await client.register_encoder_url(encoder.url)
        page, _ = await open_page(browser, served.url + "/")
        await encoder_says(page, encoder.url, "healthy", "✓")
        encoder.status = 500
        await encoder_says(page, encoder.url, "failing", "failed health check")
        # Three failed probes, 1.5 s apart, from the first: the eviction comes up to 4.5 s after "failing".
        await encoder_says(page, encoder.url, "evicted", "evicted since", timeout=SHOWN + 4_500)
        await text_in(page, "#encoder-count", "0 encoder URLs listed, 1 evicted")
        encoder.status = 200
        await encoder_says(page, encoder.url, "healthy")
        await page.context.close()
