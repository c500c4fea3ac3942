"""What the bring-up page's browser tests share: one Chromium per test module, a server, a page, and
the waits on its DOM (``test_page``: the grid and its connection; ``test_page_looks``: the waits and
encoder health it shows).

Each test opens a fresh page on a real server (``BootstrapServer`` on port 0), changes the registry
through a ``BootstrapClient``, and awaits the DOM with ``wait_for_function`` (no sleeps). Cells are
read by their ``title`` (``rank N: <state>, ...``), as a screen reader would. Where
``/usr/bin/chromium`` or the ``playwright`` package is missing the tests skip with a reason starting
"chromium" (:data:`SKIP`), which ``.ci/run`` turns into a failure.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from aiobootstrap import BootstrapServer
from testbed.chromium import CHROMIUM, CHROMIUM_ARGS, missing

SHOWN = 5_000
"""Milliseconds a change may take to show: generous (the page shows one within a second)."""
DOCS = Path(__file__).resolve().parents[1] / "docs"
DOCS_SHOTS = frozenset({"page.png", "page-4096.png", "page-prefill.png"})
"""The screenshots the README and docs/operations.md show: written to docs/ only when
``AIOBOOTSTRAP_SCREENSHOTS=docs`` (``make screenshots``), so a test run leaves git clean."""

if missing() is None:
    from playwright.async_api import Browser, Page, async_playwright

SKIP = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(missing() is not None, reason=str(missing())),
]
"""Each browser test module's ``pytestmark``: on the module's loop (its browser's), skipped without Chromium."""


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


async def open_page(
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


async def cell_says(page: Page, rank: int, state: str, section: int = 0, *, timeout: float = SHOWN) -> None:
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


async def text_in(page: Page, selector: str, text: str) -> None:
    await page.wait_for_function(
        "([selector, text]) => (document.querySelector(selector)?.textContent || '').includes(text)",
        arg=[selector, text],
        timeout=SHOWN,
    )


async def count(page: Page, selector: str) -> int:
    return int(await page.evaluate("(selector) => document.querySelectorAll(selector).length", selector))


async def hover(page: Page, rank: int) -> None:
    """Hover a cell: its title is written out at the top of the page."""
    await page.hover(f'[data-rank="{rank}"]')
    await text_in(page, "#detail", f"rank {rank}: ")


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """Where this test's screenshots go: ``$AIOBOOTSTRAP_SCREENSHOTS`` when it names a folder, else
    ``tmp_path``; with ``AIOBOOTSTRAP_SCREENSHOTS=docs`` the docs' own go to docs/, the rest to ``tmp_path``."""
    chosen = os.environ.get("AIOBOOTSTRAP_SCREENSHOTS", "")
    return Path(chosen) if chosen and chosen != "docs" else tmp_path


async def screenshot(page: Page, name: str, folder: Path, *, full_page: bool = False) -> None:
    docs = os.environ.get("AIOBOOTSTRAP_SCREENSHOTS") == "docs" and name in DOCS_SHOTS
    # Playwright makes the folder.
    await page.screenshot(path=str((DOCS if docs else folder) / name), full_page=full_page)


LOOKED = SHOWN + 5_000
"""Milliseconds a parked wait may take to show: the page looks at waits every 5 s (they are no watch change)."""


async def title_has(page: Page, rank: int, text: str, *, present: bool = True) -> None:
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


class Encoder:
    """A tiny encoder whose ``/health`` answers ``status``: a real aiohttp server on a free port."""

    def __init__(self) -> None:
        self.status = 200
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=self.status, text="OK")

    async def __aenter__(self) -> Encoder:
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


async def encoder_says(page: Page, url: str, state: str, text: str = "", *, timeout: float = SHOWN) -> None:
    await page.wait_for_function(
        """([url, state, text]) => [...document.querySelectorAll('#encoder-list li')].some(
            li => li.textContent.includes(url) && li.dataset.state === state && li.textContent.includes(text))""",
        arg=[url, state, text],
        timeout=timeout,
    )
