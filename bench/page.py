"""The bring-up page in Chromium: first render, a registration shown, the memory it takes.

    python -m bench.page [--ranks 4096] [--big 65536] [--samples 50] [--pages 100] [--window 30]

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
Then **what open pages cost the server** (``--pages``, 0 to skip; ``--only-pages`` for this alone):
a server process (``python -m aiobootstrap``, world size 64, 48 ranks registered,
one encoder URL: its own, so healthy) holds, in turn, ``--pages`` pages open in
one Chromium and ``--pages`` parked watchers from a Python client
(``GET /watch?after=V&wait=25`` in a loop, as a page's). Each page has a host
name of its own (``pN.page.test``, mapped to 127.0.0.1 by
``--host-resolver-rules``): a browser keeps at most 6 connections to one host,
so a 7th tab of one origin waits for one of them (see docs/operations.md), and
100 pages of one host would not be 100 parked watchers. One site, so the pages
share a few renderer processes. Each on a fresh server, alternated
``--rounds`` times; once all are parked (``aiobootstrap_watchers`` says so), the
server's CPU seconds over ``--window`` seconds (the process's CPU clock, to the
nanosecond, not ``/proc/PID/stat``'s 10 ms ticks) and its RSS growth since before
they came. Figures are medians, and the pages' as a ratio to the watchers'.
Beside the CPU clock: its split into user and system time (``/proc/PID/stat``'s
ticks), and how often the server was switched out while runnable (its threads'
``nonvoluntary_ctxt_switches``): the browser's work between a reply and the
next renewal runs on the same two cores and leaves the server's caches cold.

Takes ~4 min; prints Markdown tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import aiohttp

from aiobootstrap import BootstrapClient, BootstrapServer
from testbed.chromium import CHROMIUM, CHROMIUM_ARGS, missing

from ._servers import SERVERS, RunningServer

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


async def _open_server() -> RunningServer:
    """A server process of world size 64: 48 ranks in, one encoder URL (its own /health: healthy)."""
    server = await RunningServer.start(SERVERS["aiobootstrap"], "--world-size", "64")
    await _fill(server.url, range(48))
    async with BootstrapClient(server.url) as client:
        await client.register_encoder_url(server.url)
    return server


async def _watchers_parked(url: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(url + "/metrics") as reply:
        text = await reply.text()
    return next(
        float(line.split()[1]) for line in text.splitlines() if line.startswith("aiobootstrap_watchers ")
    )


async def _window(server: RunningServer, count: int, seconds: float, before_rss: int) -> dict[str, float]:
    async with asyncio.timeout(120):
        # A page's first watch answers at once, then parks; another process's count, read over HTTP.
        while await _watchers_parked(server.url) < count:  # noqa: ASYNC110
            await asyncio.sleep(0.5)
    began, (user, system), preempted = server.cpu_clock_seconds(), server.cpu_split(), server.preempted()
    await asyncio.sleep(seconds)
    used = server.cpu_clock_seconds() - began
    # Read before the /metrics request below, which is not theirs.
    (user_end, system_end), preempted_end = server.cpu_split(), server.preempted()
    parked = await _watchers_parked(server.url)
    return {
        "cpu": used,
        "user": user_end - user,
        "system": system_end - system,
        "preempted": preempted_end - preempted,
        "rss": (server.rss() - before_rss) / 1024,
        "parked": parked,
    }


_HIDDEN = "Object.defineProperty(document, 'visibilityState', {get: () => 'hidden'});"
"""A tab in the background, as the page sees it: it then looks at nothing but its watch."""


async def _with_pages(browser, count: int, seconds: float, *, hidden: bool = False) -> dict[str, float]:  # type: ignore[no-untyped-def]
    server = await _open_server()
    try:
        before = server.rss()
        context = await browser.new_context()
        if hidden:
            await context.add_init_script(_HIDDEN)
        pages = [await context.new_page() for _ in range(count)]
        port = server.url.rsplit(":", 1)[1]
        opening = time.perf_counter()
        for index, page in enumerate(pages):  # one at a time: the machine is shared
            await page.goto(f"http://p{index}.page.test:{port}/")
        spread = (time.perf_counter() - opening) / count
        live = "() => document.querySelector('#conn').textContent.startsWith('live')"
        await asyncio.gather(*(page.wait_for_function(live, timeout=120_000) for page in pages))
        figures = await _window(server, count, seconds, before)
        await context.close()
        return {**figures, "spread": spread}
    finally:
        await server.stop()


class _Live:
    """Set once ``count`` watchers have had their first answer (and so park from then on)."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.all = asyncio.Event()

    def one(self) -> None:
        self.left -= 1
        if not self.left:
            self.all.set()


async def _watcher(http: aiohttp.ClientSession, url: str, live: _Live, start: float = 0.0) -> None:
    """What a page's watch does: a long-poll from the last version, for ever (from ``start`` s on)."""
    await asyncio.sleep(start)
    version, first = 0, True
    while True:
        async with http.get(f"{url}/watch", params={"after": str(version), "wait": "25"}) as reply:
            version = (await reply.json())["version"]
        if first:
            first = False
            live.one()


async def _with_watchers(count: int, seconds: float, spread: float = 0.0) -> dict[str, float]:
    """``spread``: seconds between one watcher's start and the next; 0, all at once."""
    server = await _open_server()
    try:
        before = server.rss()
        live = _Live(count)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as http:
            watchers = [
                asyncio.create_task(_watcher(http, server.url, live, index * spread))
                for index in range(count)
            ]
            await live.all.wait()
            figures = await _window(server, count, seconds, before)
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
        return figures
    finally:
        await server.stop()


async def _compare(browser, count: int, seconds: float, rounds: int) -> str:  # type: ignore[no-untyped-def]
    pages: list[dict[str, float]] = []
    hidden: list[dict[str, float]] = []
    watchers: list[dict[str, float]] = []
    spread: list[dict[str, float]] = []
    for _ in range(rounds):
        watchers.append(await _with_watchers(count, seconds))
        pages.append(await _with_pages(browser, count, seconds))
        hidden.append(await _with_pages(browser, count, seconds, hidden=True))
        # Renewals at the pages' own cadence: a burst of long-polls renewed together costs less per poll
        # than the same polls one after another (each on a loop woken from idle).
        spread.append(await _with_watchers(count, seconds, pages[-1]["spread"]))
        print(
            f"round: pages {pages[-1]}, hidden {hidden[-1]}, watchers {watchers[-1]}, spread {spread[-1]}",
            file=sys.stderr,
        )

    def median(runs: list[dict[str, float]], name: str) -> float:
        return statistics.median(run[name] for run in runs)

    def ratio(part: float, whole: float) -> str:
        return f"{part / whole:.2f}\u00d7" if whole > 0 else "-"

    lines = [
        f"| {count} of each, {seconds:g} s, median of {rounds} | pages, visible | pages, hidden tabs "
        "| parked watchers, started together | started as the pages opened "
        "| visible / watchers (together, as opened) | hidden / watchers (together, as opened) |",
        "|---|---|---|---|---|---|---|",
        f"| watches parked at the end | {median(pages, 'parked'):.0f} | {median(hidden, 'parked'):.0f} "
        f"| {median(watchers, 'parked'):.0f} | {median(spread, 'parked'):.0f} | | |",
    ]
    for name, label, unit, places in (("cpu", "server CPU", "s", 3), ("rss", "server RSS growth", "MB", 2)):
        page, tab, watcher = median(pages, name), median(hidden, name), median(watchers, name)
        opened = median(spread, name)
        lines.append(
            f"| {label} | {page:.{places}f} {unit} | {tab:.{places}f} {unit} | {watcher:.{places}f} {unit} "
            f"| {opened:.{places}f} {unit} "
            f"| {ratio(page, watcher)}, {ratio(page, opened)} | {ratio(tab, watcher)}, {ratio(tab, opened)} |"
        )
    cells = [
        f"{median(runs, 'user'):.2f} + {median(runs, 'system'):.2f} s"
        for runs in (pages, hidden, watchers, spread)
    ]
    lines.append(f"| of which user + system (10 ms ticks) | {' | '.join(cells)} | | |")
    cells = [f"{median(runs, 'preempted'):.0f}" for runs in (pages, hidden, watchers, spread)]
    lines.append(f"| server preempted (switched out while runnable) | {' | '.join(cells)} | | |")
    return "\n".join(lines)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.page")
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--big", type=int, default=65536)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--pages", type=int, default=100, help="open pages against as many watchers; 0: skip")
    parser.add_argument("--only-pages", action="store_true", help="only the open pages' cost")
    parser.add_argument("--window", type=float, default=30.0, help="seconds each is measured")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if missing() is not None:
        print(f"bench.page: skipped: {missing()}", file=sys.stderr)
        return 0
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=[*_ARGS, "--host-resolver-rules=MAP *.page.test 127.0.0.1"]
        )
        worlds = () if args.only_pages else (args.ranks, args.big)
        rows = [(world, await _measure(browser, world, args.samples)) for world in worlds]
        compared = await _compare(browser, args.pages, args.window, args.rounds) if args.pages else ""
        await browser.close()
    if rows:
        print("| ranks | first render | registration shown: p50 | worst | JS heap |")
        print("|---|---|---|---|---|")
    for world, figures in rows:
        print(
            f"| {world:,} | {figures['render']:.0f} ms | {figures['p50']:.0f} ms | {figures['max']:.0f} ms "
            f"| {figures['heap']:.0f} MB |"
        )
    if compared:
        print()
        print(compared)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
