"""The bring-up page in Chromium: first render, a registration shown, the memory it takes.

    python -m bench.page [--ranks 4096] [--big 65536] [--samples 50]

A ``BootstrapServer`` of world size ``--ranks`` with every rank but the last
``--samples`` registered; Debian's Chromium (``/usr/bin/chromium``, through
Playwright) opens the page:

- **first render**: from ``goto`` to every cell drawn (wall clock, in Python);
- **registration shown**: ``--samples`` registrations, one at a time; each is
  the time from its ``200`` (``time.time()`` when the client returns) to the
  moment its cell's ``title`` says registered, stamped in the page by a
  ``MutationObserver`` (``performance.timeOrigin + performance.now()``; one
  machine, one clock). The figure is the median and the worst.

Then the same at ``--big`` ranks (every one registered but the samples), with
the page's JavaScript heap (``performance.memory``) once it has settled.
Takes ~1 min; prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from aiobootstrap import BootstrapClient, BootstrapServer
from tests.chromium import CHROMIUM, CHROMIUM_ARGS, missing

_ARGS = [*CHROMIUM_ARGS, "--enable-precise-memory-info"]
_OBSERVE = """([lo, hi]) => {
    window.__shown = {};
    new MutationObserver((changes) => {
        const now = performance.timeOrigin + performance.now();
        for (const change of changes) {
            const cell = change.target.closest ? change.target : null;
            for (const node of [cell, ...change.addedNodes]) {
                if (!node || !node.querySelectorAll) continue;
                for (const el of [node, ...node.querySelectorAll("[title]")]) {
                    // A cell (rank N) or, above 8,192 ranks, a run (ranks A-B) of the sampled ranks.
                    const m = /^ranks? (\\d+)(?:-(\\d+))?: registered/.exec(el.title || "");
                    if (!m) continue;
                    const first = Math.max(lo, Number(m[1])), last = Math.min(hi - 1, Number(m[2] || m[1]));
                    for (let r = first; r <= last; r++) if (!(r in window.__shown)) window.__shown[r] = now;
                }
            }
        }
    }).observe(document.getElementById("groups"), {subtree: true, childList: true, attributes: true,
        attributeFilter: ["title"]});
}"""


async def _fill(url: str, ranks: range) -> None:
    async with BootstrapClient(url) as client:
        for start in range(ranks.start, ranks.stop, 512):
            chunk = range(start, min(start + 512, ranks.stop))
            await asyncio.gather(
                *(client.register(r, session_id=f"s{r}", weights_info_dict={}) for r in chunk)
            )


async def _measure(browser, world: int, samples: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    async with BootstrapServer(host="127.0.0.1", port=0, world_size=world) as server:
        filling = time.perf_counter()
        await _fill(server.url, range(world - samples))
        print(
            f"{world:,} ranks: {world - samples:,} registered in {time.perf_counter() - filling:.1f} s",
            file=sys.stderr,
        )
        page = await (await browser.new_context()).new_page()
        began = time.perf_counter()
        await page.goto(server.url + "/")
        last = world - samples - 1
        await page.wait_for_function(
            "(rank) => [...document.querySelectorAll('#groups [title]')].some(el => "
            "el.title.startsWith(`rank ${rank}: registered`) || el.title.includes(`-${rank}: registered`))",
            arg=last,
            timeout=60_000,
        )
        rendered = time.perf_counter() - began
        await page.wait_for_function("() => document.querySelector('#conn').textContent === 'live'")
        await page.evaluate(_OBSERVE, [world - samples, world])
        delays = []
        async with BootstrapClient(server.url) as client:
            for rank in range(world - samples, world):
                await client.register(rank, session_id=f"s{rank}", weights_info_dict={})
                answered = time.time() * 1000
                await page.wait_for_function(
                    "(rank) => rank in window.__shown", arg=str(rank), timeout=10_000
                )
                delays.append(await page.evaluate("(rank) => window.__shown[rank]", str(rank)) - answered)
        heap = await page.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize : 0")
        await page.context.close()
    return {
        "render": rendered * 1000,
        "p50": statistics.median(delays),
        "max": max(delays),
        "heap": heap / 2**20,
    }


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.page")
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--big", type=int, default=65536)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args(argv)
    if missing() is not None:
        print(f"bench.page: skipped: {missing()}", file=sys.stderr)
        return 0
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=_ARGS)
        rows = [(world, await _measure(browser, world, args.samples)) for world in (args.ranks, args.big)]
        await browser.close()
    print("| ranks | first render | registration shown: p50 | worst | JS heap |")
    print("|---|---|---|---|---|")
    for world, figures in rows:
        print(
            f"| {world:,} | {figures['render']:.0f} ms | {figures['p50']:.0f} ms | {figures['max']:.0f} ms "
            f"| {figures['heap']:.0f} MB |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
