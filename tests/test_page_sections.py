"""The page is composed of the faces' sections: a face shows on the page by the script it ships (its
folder's ``page.js``, or ``Face.page_script``), pushed to ``aiobootstrap.sections``; a face not served
sends nothing to the page. A toy face defined here shows its section and follows its kind's changes
in a real browser; ``--faces mooncake,native`` serves a page with Mooncake's section alone."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import aiohttp
import pytest_asyncio
from aiohttp.test_utils import BaseTestServer, TestServer

from aiobootstrap import BootstrapServer, ServerConfig, create_app
from aiobootstrap._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap.server.appkeys import REGISTRY
from aiobootstrap.server.bringup_page import page_scripts
from aiobootstrap.server.face import Face
from aiobootstrap.server.face_registry import installed_faces
from aiobootstrap.server.kind_spec import KindSpec
from aiobootstrap.store import Key, Record

from . import page_browser
from .page_browser import SHOWN, SKIP, open_page, text_in

browser = page_browser.browser

NOTE = "toy_note"

TOY_SCRIPT = """
// A toy face's section: the names of its notes, each an item titled by its name, from the changes the
// history keeps and then live from the watch.
const { main } = aiobootstrap;
const section = document.createElement("section");
section.id = "toy";
section.innerHTML = "<h2>toy notes</h2><div id='toy-count' class='counts'></div><ul id='toy-list'></ul>";
main.append(section);
let notes = [];
function changed(change) {
  notes = notes.filter((name) => name !== change.key);
  if (change.op === "put") notes.push(change.key);
}
function render() {
  document.getElementById("toy-count").textContent = notes.length + " note" + (notes.length === 1 ? "" : "s");
  document.getElementById("toy-list").replaceChildren(...notes.map((name) => {
    const item = document.createElement("li");
    item.textContent = "✎ " + name;
    item.title = "note " + name;
    return item;
  }));
}
aiobootstrap.sections.push({
  kinds: ["toy_note"],
  load(kept) { notes = []; for (const change of kept || []) if (change.kind === "toy_note") changed(change); },
  render,
  changed,
  replied(reply, told) { if (told) render(); },
});
"""


def _encode(record: Record) -> bytes:
    return b"note " + str(record.version).encode()


TOY = Face.of_routes("toy", list, kinds=(KindSpec(NOTE, _encode),), page_script=lambda: TOY_SCRIPT)
"""A face of no engine and no route: a kind of named records, and a section of the page."""

_BROWSER = {"Accept": "text/html"}


def _scripts_of(text: str) -> list[str]:
    return re.findall(r"<script>(.*?)</script>", text, flags=re.DOTALL)


def _folder_script(name: str) -> str:
    [face] = [face for face in installed_faces() if face.name == name]
    [(_, script)] = page_scripts([face])
    return script().strip()


async def test_only_the_served_faces_scripts_are_on_the_page(aiohttp_client):
    """``--faces mooncake,native``: Mooncake's script is on the page, no other face's; the policy names the
    page's one script and style by their digests, as with every face served."""
    client = await aiohttp_client(create_app(ServerConfig(faces=("mooncake", "native"))))
    reply = await client.get("/", headers=_BROWSER)
    assert reply.status == 200
    text = await reply.text()
    [script] = _scripts_of(text)
    assert _folder_script("mooncake") in script
    for other in ("engine_info", "encoders", "prefill"):
        assert _folder_script(other) not in script, other
    assert not re.search(r"encoder|prefill|transfer_engine", script)
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]+';", reply.headers["Content-Security-Policy"])
    every = await (await aiohttp_client(create_app())).get("/", headers=_BROWSER)
    [all_of_them] = _scripts_of(await every.text())
    for face in ("engine_info", "encoders", "prefill", "mooncake"):
        assert _folder_script(face) in all_of_them, face
    assert reply.headers["Content-Security-Policy"] != every.headers["Content-Security-Policy"]


@pytest_asyncio.fixture(loop_scope="module")
async def toy_server() -> AsyncIterator[BaseTestServer]:
    """The installed faces and the toy face, served on a free port."""
    async with TestServer(create_app(faces=(*installed_faces(), TOY)), host="127.0.0.1") as served:
        yield served


class TestInABrowser:
    pytestmark = SKIP

    async def test_a_toy_faces_section_shows_and_follows_its_kind(self, browser, toy_server):
        """The toy face's script draws its section from the kept history, then follows a new note and a
        deleted one; the other faces' sections stand beside it, and the page raises no error."""
        registry = toy_server.app[REGISTRY]
        await registry.register(Key.named("default", NOTE, DEFAULT_ROLE, "first"), {"text": "hi"})
        page, _ = await open_page(browser, str(toy_server.make_url("/")))
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await text_in(page, "#conn", "live")
        await text_in(page, "#toy-count", "1 note")
        assert await page.get_attribute("#toy-list li", "title") == "note first"
        await registry.register(Key.named("default", NOTE, DEFAULT_ROLE, "second"), {"text": "hi"})
        await text_in(page, "#toy-list", "✎ second")
        await text_in(page, "#toy-count", "2 notes")
        await registry.unregister(Key.named("default", NOTE, DEFAULT_ROLE, "first"))
        await page.wait_for_function(
            "() => document.querySelector('#toy-count').textContent === '1 note'", timeout=SHOWN
        )
        assert await page.text_content("#toy-list") == "✎ second"
        await text_in(page, "#encoder-count", "0 encoder URLs listed")
        # A namespace of notes alone is no engine-info deployment: no empty rank grid beside them (with no
        # world size there is no missing rank to show either).
        assert await page.locator("#groups section").count() == 0
        await registry.register(
            Key("default", TRANSFER_ENGINE_INFO, DEFAULT_ROLE, 3),
            {"session_id": "h:1", "weights_info_dict": {}},
        )
        await text_in(page, "#groups .counts", "1 registered")
        assert errors == []
        await page.context.close()

    async def test_a_page_of_mooncake_and_native_shows_mooncake_alone(self, browser):
        """``--faces mooncake,native``: the Mooncake engines follow; no rank grid, no encoder list, no error."""
        async with BootstrapServer(host="127.0.0.1", port=0, faces=("mooncake", "native")) as server:
            page, requested = await open_page(browser, server.url + "/ns/mc/")
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            await text_in(page, "#conn", "live")
            async with aiohttp.ClientSession() as http:
                value = b'{"ip_or_host_name":"10.0.0.7","rpc_port":15868}'
                async with http.put(
                    f"{server.url}/ns/mc/metadata?key=mooncake/rpc_meta/h:1", data=value
                ) as reply:
                    assert reply.status == 200
            await text_in(page, "#mooncake-list", "h:1 — RPC 10.0.0.7:15868, no segment yet")
            assert await page.locator("#groups, #encoders, #prefill").count() == 0
            assert not [url for url in requested if re.search(r"/ranks|encoder|/prefill", url)], requested
            assert errors == []
            await page.context.close()
