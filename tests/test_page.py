"""The bring-up page (SPEC section 11) in a real browser: Debian's Chromium driven by Playwright.

One browser for the module (on the module's event loop); each test opens a
fresh page on a real server (``BootstrapServer`` on port 0), changes the
registry through a ``BootstrapClient``, and awaits the DOM with ``wait_for_function`` (no sleeps). Cells are
read by their ``title`` (``rank N: <state>, ...``), as a screen reader would.
Where ``/usr/bin/chromium`` or the ``playwright`` package is missing the tests
skip with a reason starting "chromium", which ``.ci/run`` turns into a failure.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from aiobootstrap import BootstrapClient, BootstrapServer
from aiobootstrap.server.tokens import TokenSet

from .chromium import CHROMIUM, CHROMIUM_ARGS, missing
from .redis_server import free_port

SHOWN = 5_000
"""Milliseconds a change may take to show: generous (the page shows one within a second)."""
DOCS = Path(__file__).resolve().parents[1] / "docs"
DOCS_SHOTS = frozenset({"page.png", "page-4096.png"})
"""The screenshots the README and docs/operations.md show: written to docs/ only when
``AIOBOOTSTRAP_SCREENSHOTS=docs`` (``make screenshots``), so a test run leaves git clean."""

if missing() is None:
    from playwright.async_api import Browser, Page, async_playwright

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(missing() is not None, reason=str(missing())),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def server() -> AsyncIterator[BootstrapServer]:
    async with BootstrapServer(host="127.0.0.1", port=0, world_size=8) as served:
        yield served


async def _open(
    browser: Browser, url: str, *, dark: bool = False, height: int = 720
) -> tuple[Page, list[str]]:
    """A fresh page at ``url``, and the log of every URL it requested."""
    context = await browser.new_context(
        color_scheme="dark" if dark else "light", viewport={"width": 1200, "height": height}
    )
    page = await context.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    await page.goto(url)
    return page, requested


async def _cell_says(page: Page, rank: int, state: str, section: int = 0, *, timeout: float = SHOWN) -> None:
    """Await the cell of ``rank`` (in the ``section``-th group) to say ``state`` in its title."""
    await page.wait_for_function(
        """([rank, state, section]) => {
            const group = document.querySelectorAll("#groups section")[section];
            const cell = group && group.querySelector(`[data-rank="${rank}"]`);
            return cell != null && cell.title.startsWith(`rank ${rank}: ${state}`);
        }""",
        arg=[rank, state, section],
        timeout=timeout,
    )


async def _text_in(page: Page, selector: str, text: str) -> None:
    await page.wait_for_function(
        "([selector, text]) => (document.querySelector(selector)?.textContent || '').includes(text)",
        arg=[selector, text],
        timeout=SHOWN,
    )


async def _count(page: Page, selector: str) -> int:
    return int(await page.evaluate("(selector) => document.querySelectorAll(selector).length", selector))


async def _hover(page: Page, rank: int) -> None:
    """Hover a cell: its title is written out at the top of the page."""
    await page.hover(f'[data-rank="{rank}"]')
    await _text_in(page, "#detail", f"rank {rank}: ")


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """Where this test's screenshots go: ``$AIOBOOTSTRAP_SCREENSHOTS`` when it names a folder, else
    ``tmp_path``; with ``AIOBOOTSTRAP_SCREENSHOTS=docs`` the docs' own go to docs/, the rest to ``tmp_path``."""
    chosen = os.environ.get("AIOBOOTSTRAP_SCREENSHOTS", "")
    return Path(chosen) if chosen and chosen != "docs" else tmp_path


async def _screenshot(page: Page, name: str, folder: Path, *, full_page: bool = False) -> None:
    docs = os.environ.get("AIOBOOTSTRAP_SCREENSHOTS") == "docs" and name in DOCS_SHOTS
    # Playwright makes the folder.
    await page.screenshot(path=str((DOCS if docs else folder) / name), full_page=full_page)


async def test_the_page_renders_every_rank_and_follows_a_registration_and_a_deletion(
    browser, server, screenshots
):
    """8 cells for world size 8, all missing; a registration turns rank 3 registered, a deletion back.

    And the page asks nothing of any host but the server (Playwright's request log)."""
    page, requested = await _open(browser, server.url + "/")
    await _cell_says(page, 7, "missing")
    assert await _count(page, "#groups section:first-child [data-rank]") == 8
    await _text_in(page, "#conn", "live")
    async with BootstrapClient(server.url) as client:
        await client.register(3, session_id="10.0.0.7:18000", weights_info_dict={})
        await _cell_says(page, 3, "registered")
        await page.wait_for_function(
            "() => document.querySelector('[data-rank=\"3\"]').title.includes('session 10.0.0.7:18000')",
            timeout=SHOWN,
        )
        await _text_in(page, "#groups .counts", "1 registered of world size 8")
        symbols = await page.evaluate(
            "() => ['3', '4'].map(r => document.querySelector(`[data-rank='${r}']`).textContent)"
        )
        assert symbols[0] != symbols[1], "a state is a symbol too, not only a colour"
        await client.unregister(3)
        await _cell_says(page, 3, "missing")
        await client.register_encoder_url("http://10.0.0.9:8000")
        await _text_in(page, "#encoder-list", "http://10.0.0.9:8000")
        await _text_in(page, "#encoder-count", "1 encoder URL listed")
    assert all(url.startswith(server.url) or url.startswith("data:") for url in requested), requested
    await _screenshot(page, "page-8.png", screenshots)
    await page.context.close()


async def test_a_lease_expiry_turns_the_cell_missing(browser, server):
    """A rank on a 3-second lease that nobody keeps alive: on a lease running out, then missing once it expires."""
    page, _ = await _open(browser, server.url + "/")
    await _text_in(page, "#conn", "live")
    info = {"session_id": "leased", "weights_info_dict": {}}
    async with aiohttp.ClientSession() as http:
        async with http.post(server.url + "/leases", json={"ttl": 3}) as reply:
            lease = (await reply.json())["lease"]
        body = {"rank": 5, "transfer_engine_info": info, "lease": lease}
        async with http.put(server.url + "/register_transfer_engine_info", json=body) as reply:
            assert reply.status == 200
    await _cell_says(page, 5, "lease running out")
    assert await page.evaluate("() => document.querySelector('[data-rank=\"5\"]').textContent") == "!"
    await _cell_says(page, 5, "missing")
    await page.context.close()


async def test_the_namespace_picker_lists_and_opens_namespaces(browser, server):
    """The picker names the namespaces /namespaces lists; choosing one opens /ns/NAME/ and its grid; a new
    role gets a grid of its own, live."""
    async with BootstrapClient(server.url, namespace="team-a") as client:
        await client.register(2, session_id="a2", weights_info_dict={})
    page, _ = await _open(browser, server.url + "/")
    await page.wait_for_function(
        "() => [...document.querySelectorAll('#ns option')].some(o => o.value === 'team-a')", timeout=SHOWN
    )
    await page.select_option("#ns", "team-a")
    await page.wait_for_url("**/ns/team-a/", timeout=SHOWN)
    await _cell_says(page, 2, "registered")
    await _cell_says(page, 0, "missing")
    async with BootstrapClient(
        server.url, namespace="team-a"
    ) as client:  # a role of its own: a grid of its own
        await client.register(4, session_id="d4", weights_info_dict={}, role="draft")
    await _text_in(page, "#groups section:nth-child(2) h2", "transfer_engine_info · draft")
    await _cell_says(page, 4, "registered", section=1)
    await page.context.close()


async def test_a_lost_server_is_said_and_the_page_catches_up_when_it_is_back(browser):
    """A server stopped: the banner says lost; a new one on the same port: back, with what it holds."""
    first = BootstrapServer(host="127.0.0.1", port=0, world_size=4)
    await first.start()
    port = first.port
    page, _ = await _open(browser, first.url + "/")
    await _text_in(page, "#conn", "live")
    await first.close()
    await _text_in(page, "#conn", "lost the server")
    async with BootstrapServer(host="127.0.0.1", port=port, world_size=4) as second:
        async with BootstrapClient(second.url) as client:
            await client.register(1, session_id="after the restart", weights_info_dict={})
        await _text_in(page, "#conn", "back")
        await _cell_says(page, 1, "registered")
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
        page, requested = await _open(browser, served.url + "/")
        await page.wait_for_selector("#token-form:not([hidden])", timeout=SHOWN)
        await page.fill("#token", "not-the-token")  # refused: the server's detail, and the form again
        await page.click("#token-form button")
        await _text_in(page, "#token-error", "not valid")
        await page.wait_for_selector("#token-form:not([hidden])", timeout=SHOWN)
        await page.fill("#token", secret)
        await page.click("#token-form button")
        await _cell_says(page, 0, "missing")
        await _text_in(page, "#conn", "live")
        await page.reload()  # asked once: kept for the tab
        await _cell_says(page, 1, "missing")
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
        page, _ = await _open(browser, served.url + "/", dark=dark, height=260)  # docs/page.png's size
        await _cell_says(page, 3, "registered")
        background, cell, text = await page.evaluate(
            """() => [getComputedStyle(document.body).backgroundColor,
                      getComputedStyle(document.querySelector('[data-rank="3"]')).backgroundColor,
                      getComputedStyle(document.body).color]"""
        )
        assert len({background, cell, text}) == 3
        assert (background == "rgb(21, 22, 20)") is dark
        await _hover(page, 3)
        await _screenshot(page, f"page-64-{'dark' if dark else 'light'}.png", screenshots)
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
            page, _ = await _open(browser, served.url + "/")
            await _cell_says(page, 4094, "registered")
            assert await _count(page, "#groups section:first-child [data-rank]") == 4096
            await client.register(4095, session_id="last", weights_info_dict={})
            await _cell_says(page, 4095, "registered")
            waiter = asyncio.create_task(client.get(1001, timeout=60))
            await _title_has(page, 1001, "1 wait parked on it")
            await _hover(page, 1001)
            await _screenshot(page, "page-4096.png", screenshots, full_page=True)
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
        await page.context.close()


async def test_65536_ranks_are_drawn_as_runs(browser):
    """At 65,536 ranks the grid is runs of ranks in one state, not 65,536 elements, and still follows."""
    async with BootstrapServer(host="127.0.0.1", port=0, world_size=65536) as served:
        page, _ = await _open(browser, served.url + "/")
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
        assert await _count(page, "#groups section:first-child .run") == 3
        async with BootstrapClient(served.url) as client:
            waiter = asyncio.create_task(client.get(50000, timeout=60))
            await page.wait_for_function(
                "() => [...document.querySelectorAll('#groups .run')].some(r => "
                "r.title === 'rank 50000: missing (1), 1 waiting on each')",
                timeout=LOOKED,
            )
            assert await _count(page, "#groups section:first-child .run") == 5
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
        await page.context.close()


LOOKED = SHOWN + 5_000
"""Milliseconds a parked wait may take to show: the page looks at waits every 5 s (they are no watch change)."""


async def _title_has(page: Page, rank: int, text: str, *, present: bool = True) -> None:
    """Await the title of ``rank``'s cell (first group) to hold ``text`` (or, ``present=False``, not to),
    within :data:`LOOKED`."""
    await page.wait_for_function(
        """([rank, text, present]) => {
            const cell = document.querySelector(`#groups section [data-rank="${rank}"]`);
            return cell != null && cell.title.includes(text) === present;
        }""",
        arg=[rank, text, present],
        timeout=LOOKED,
    )


async def test_waiters_are_shown_on_their_ranks_and_follow_parks_and_leaves(browser, server):
    """A get parked on rank 3 marks its cell (a digit and a marker, and the title); a second makes it 2;
    both leaving unmark it. Nothing changes in the records: the page sees it by looking again."""
    page, _ = await _open(browser, server.url + "/")
    await _text_in(page, "#conn", "live")
    async with BootstrapClient(server.url) as client:
        first = asyncio.create_task(client.get(3, timeout=60))
        await _title_has(page, 3, "1 wait parked on it")
        assert await page.evaluate("() => document.querySelector('[data-rank=\"3\"]').textContent") == "1"
        assert await page.evaluate(
            "() => document.querySelector('[data-rank=\"3\"]').classList.contains('waited')"
        )
        await _title_has(page, 4, "parked", present=False)
        second = asyncio.create_task(client.get(3, timeout=60))
        await _title_has(page, 3, "2 waits parked on it")
        for task in (first, second):
            task.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
        await _title_has(page, 3, "parked", present=False)
        assert await page.evaluate("() => document.querySelector('[data-rank=\"3\"]').textContent") == "·"
    await page.context.close()


class _Encoder:
    """A tiny encoder whose ``/health`` answers ``status``: a real aiohttp server on a free port."""

    def __init__(self) -> None:
        self.status = 200
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=self.status, text="OK")

    async def __aenter__(self) -> _Encoder:
        app = web.Application()
        app.router.add_get("/health", self.health)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


async def _encoder_says(page: Page, url: str, state: str, text: str = "", *, timeout: float = SHOWN) -> None:
    await page.wait_for_function(
        """([url, state, text]) => [...document.querySelectorAll('#encoder-list li')].some(
            li => li.textContent.includes(url) && li.dataset.state === state && li.textContent.includes(text))""",
        arg=[url, state, text],
        timeout=timeout,
    )


async def test_encoder_health_is_shown_and_follows_an_eviction(browser):
    """An encoder answering /health is healthy; made to fail, it is failing (with its count), then evicted
    (since when); answering again, healthy and listed again. Each state a symbol and words."""
    async with (
        _Encoder() as encoder,
        BootstrapServer(
            host="127.0.0.1", port=0, world_size=4, encoder_health_interval=1.5, encoder_health_timeout=0.5
        ) as served,
    ):
        async with BootstrapClient(served.url) as client:
            await client.register_encoder_url(encoder.url)
        page, _ = await _open(browser, served.url + "/")
        await _encoder_says(page, encoder.url, "healthy", "✓")
        encoder.status = 500
        await _encoder_says(page, encoder.url, "failing", "failed health check")
        # Three failed probes, 1.5 s apart, from the first: the eviction comes up to 4.5 s after "failing".
        await _encoder_says(page, encoder.url, "evicted", "evicted since", timeout=SHOWN + 4_500)
        await _text_in(page, "#encoder-count", "0 encoder URLs listed, 1 evicted")
        encoder.status = 200
        await _encoder_says(page, encoder.url, "healthy")
        await page.context.close()


async def test_the_screenshot_of_64_ranks(browser, screenshots):
    """docs/page.png, made true by the run: 64 ranks, most registered, some missing, one on a lease running
    out, waits parked on two missing ranks, one encoder URL healthy and one evicted; rank 45 hovered."""
    dead = f"http://127.0.0.1:{free_port()}"
    async with (
        _Encoder() as encoder,
        BootstrapServer(
            host="127.0.0.1", port=0, world_size=64, encoder_health_interval=0.5, encoder_health_timeout=0.5
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
        page, _ = await _open(browser, served.url + "/", height=300)
        await _title_has(page, 45, "2 waits parked on it")
        await _title_has(page, 50, "1 wait parked on it")
        await _encoder_says(page, dead, "evicted", "evicted since")
        await _encoder_says(page, encoder.url, "healthy")
        await _cell_says(page, 41, "lease running out", timeout=SHOWN + 4_000)  # half of its 8 s
        await _hover(page, 45)
        await _screenshot(page, "page.png", screenshots, full_page=True)
        for task in waiters:
            task.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        await page.context.close()
