"""The bring-up page and the ``--listen`` listeners, in a real browser: on a listener's port the page is its
namespace's (named, its ranks shown, the picker kept to it); on the main port a namespace's page links its
listener."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest_asyncio

from aiobootstrap import BootstrapServer
from aiobootstrap.server.config import NamespaceListener

from . import page_browser
from .page_browser import SKIP, cell_says, open_page, text_in

pytestmark = SKIP
browser = page_browser.browser


@pytest_asyncio.fixture(loop_scope="module")
async def server() -> AsyncIterator[BootstrapServer]:
    async with BootstrapServer(port=0, world_size=2, listen=(NamespaceListener(0, "pd"),)) as served:
        yield served


async def test_a_listeners_page_is_its_namespaces(browser, server):
    """At a listener's URL the page names its namespace, shows the rank registered there, and keeps the
    picker to it; the main port's /ns/pd/ page links the listener."""
    listener = dict(server.listeners)["pd"]
    async with aiohttp.ClientSession() as http:
        body = {"rank": 1, "transfer_engine_info": {"session_id": "10.0.0.7:1", "weights_info_dict": {}}}
        async with http.put(f"{listener}/register_transfer_engine_info", json=body) as reply:
            assert reply.status == 200
    page, _ = await open_page(browser, listener + "/")
    await text_in(page, "#conn", "live")
    await text_in(page, "#listening", "this port serves namespace pd alone (--listen)")
    await cell_says(page, 1, "registered")
    assert await page.eval_on_selector("#ns", "select => [select.value, select.disabled]") == ["pd", True]
    await page.context.close()
    page, _ = await open_page(browser, server.url + "/ns/pd/")
    await text_in(page, "#listening", f"also listening on {listener}")
    assert await page.eval_on_selector("#listening a", "link => link.href") == listener + "/"
    await page.context.close()
