"""The prefill bootstrap (SGLang's PD disaggregation), side by side with the engines' way.

Three figures, each against a reference built the engines' way (an aiohttp app
over a dict, in a daemon thread of this process, written from the protocol's
table: ``PUT``/``GET /route``, ``/register_dp_rank``, ``/query_dp_ranks``):

- **decode learns a complete topology**: from the last prefill rank's ``200``
  to decode's answer, decode waiting (``wait=``) on aiobootstrap vs polling
  once a second (SGLang's decode, at a random phase) on the reference;
- **``GET /route`` of one rank** under ``wrk -c64``: requests a second;
- **``/query_dp_ranks`` of 256 rooms under 64 decode workers** for 5 s, the
  rooms registered 1 s in: requests and server CPU, waiting vs polling.

``python -m bench.prefill`` (``--quick``: fewer runs); aiobootstrap runs as
``python -m aiobootstrap`` in a process of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import threading
import time
from typing import Any

import aiohttp
from aiohttp import web

from ._servers import SERVERS, RunningServer, cpu_seconds
from ._wire import Target
from ._wrk import find_wrk, run_wrk

ALL = "prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1"
ONE = "prefill_dp_rank=1&prefill_cp_rank=0&target_tp_rank=1&target_pp_rank=0"


def rank(tp: int, dp: int) -> dict[str, Any]:
    return {
        "attn_tp_size": 2, "attn_tp_rank": tp, "attn_cp_size": 1, "attn_cp_rank": 0,
        "attn_dp_size": 2, "attn_dp_rank": dp, "pp_size": 1, "pp_rank": 0,
        "system_dp_size": 1, "system_dp_rank": 0, "rank_ip": f"10.0.0.{tp}", "rank_port": 17000 + dp,
        "page_size": 1, "kv_cache_dtype": "auto", "load_balance_method": "round_robin",
    }  # fmt: skip


def reference_app() -> web.Application:
    """The engines' way, from the protocol's table: a dict of ranks, a count of PUTs, a dict of rooms."""
    ranks: dict[tuple[int, int, int, int], dict[str, Any]] = {}
    rooms: dict[int, int] = {}
    state: dict[str, Any] = {"count": 0, "sizes": None}

    async def route_put(request: web.Request) -> web.Response:
        data = await request.json()
        if state["sizes"] is None:
            state["sizes"] = (
                data["attn_dp_size"],
                data["attn_cp_size"],
                data["attn_tp_size"],
                data["pp_size"],
            )
        key = (data["attn_dp_rank"], data["attn_cp_rank"], data["attn_tp_rank"], data["pp_rank"])
        ranks[key] = {"rank_ip": data["rank_ip"], "rank_port": data["rank_port"]}
        state["count"] += 1
        return web.Response(text="OK")

    async def route_get(request: web.Request) -> web.Response:
        query = [int(request.query[name]) for name in ALL.replace("=-1", "").split("&")]
        sizes = state["sizes"]
        if sizes is None or state["count"] < sizes[0] * sizes[1] * sizes[2] * sizes[3]:
            return web.Response(
                status=503,
                text=f"Prefill server not fully registered yet ({state['count']} workers registered).",
            )
        if query == [-1, -1, -1, -1]:
            return web.json_response({"attn_tp_size": sizes[2], "dp_size": sizes[0]})
        found = ranks.get(tuple(query))  # type: ignore[arg-type]
        return web.Response(status=404, text="not found") if found is None else web.json_response(found)

    async def route_delete(request: web.Request) -> web.Response:
        # Not the engines' (theirs has no DELETE): the benchmark starts each run from nothing.
        ranks.clear()
        state.update(count=0, sizes=None)
        return web.Response(text="OK")

    async def register_room(request: web.Request) -> web.Response:
        data = await request.json()
        rooms[int(data["bootstrap_room"])] = int(data["dp_rank"])
        return web.Response(text="OK")

    async def query_rooms(request: web.Request) -> web.Response:
        data = await request.json()
        return web.json_response({str(r): rooms[r] for r in data["bootstrap_rooms"] if r in rooms})

    app = web.Application()
    app.router.add_put("/route", route_put)
    app.router.add_get("/route", route_get)
    app.router.add_delete("/route", route_delete)
    app.router.add_post("/register_dp_rank", register_room)
    app.router.add_post("/query_dp_ranks", query_rooms)
    return app


class Reference:
    """The reference app in a daemon thread, as the engines host their bootstrap servers."""

    def __init__(self) -> None:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            runner = web.AppRunner(reference_app(), access_log=None)
            self._loop.run_until_complete(runner.setup())
            self._loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
            self.port = runner.addresses[0][1]
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}"


async def learn_topology(http: aiohttp.ClientSession, base: str, *, waiting: bool) -> float:
    """Seconds from the last rank's 200 to decode's parallel info: decode waiting, or polling once a second."""
    await http.delete(f"{base}/route?{ALL}")
    for tp, dp in ((0, 0), (1, 0), (0, 1)):
        await (await http.put(f"{base}/route", json=rank(tp, dp))).read()
    answered: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    async def decode() -> None:
        if waiting:
            async with http.get(f"{base}/route?{ALL}&wait=60") as reply:
                await reply.read()
        else:
            await asyncio.sleep(random.random())  # a decode cycle's phase
            while True:
                async with http.get(f"{base}/route?{ALL}") as reply:
                    await reply.read()
                    if reply.status == 200:
                        break
                await asyncio.sleep(1.0)
        answered.set_result(time.perf_counter())

    task = asyncio.create_task(decode())
    await asyncio.sleep(0.05)
    async with http.put(f"{base}/route", json=rank(1, 1)) as reply:
        await reply.read()
        registered = time.perf_counter()
    done = await answered
    await task
    return done - registered


async def rooms_under_decode(
    http: aiohttp.ClientSession, base: str, pid: int | None, *, waiting: bool
) -> tuple[int, float]:
    """64 decode workers asking for 256 rooms for 5 s, the rooms registered 1 s in: requests, server CPU s."""
    rooms = [random.getrandbits(63) for _ in range(256)]
    count = 0
    stop = time.perf_counter() + 5.0
    before = cpu_seconds(pid) if pid else time.process_time()

    async def worker() -> None:
        nonlocal count
        known: dict[str, int] = {}
        while time.perf_counter() < stop and len(known) < len(rooms):
            query = "?wait=5" if waiting else ""
            async with http.post(f"{base}/query_dp_ranks{query}", json={"bootstrap_rooms": rooms}) as reply:
                known = await reply.json()
            count += 1
            if not waiting:
                await asyncio.sleep(0.01)  # a scheduling cycle

    async def register() -> None:
        await asyncio.sleep(1.0)
        for room in rooms:
            await (
                await http.post(f"{base}/register_dp_rank", json={"bootstrap_room": room, "dp_rank": 1})
            ).read()

    await asyncio.gather(register(), *(worker() for _ in range(64)))
    used = (cpu_seconds(pid) if pid else time.process_time()) - before
    return count, used


async def main(quick: bool) -> None:
    runs = 6 if quick else 20
    server = await RunningServer.start(SERVERS["aiobootstrap"])
    reference = Reference()
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            waited = [await learn_topology(http, server.url, waiting=True) for _ in range(runs)]
            polled = [await learn_topology(http, reference.url, waiting=False) for _ in range(runs)]
            print(json.dumps({"figure": "decode learns the topology (s from the last rank's 200)",
                              "aiobootstrap wait= p50": statistics.median(waited), "max": max(waited),
                              "reference 1 s poll p50": statistics.median(polled), "max ": max(polled)}))  # fmt: skip
            for tp, dp in ((0, 0), (1, 0), (0, 1), (1, 1)):
                await (await http.put(f"{reference.url}/route", json=rank(tp, dp))).read()
            if find_wrk():
                ours, theirs = [], []
                for _ in range(3):  # in turn, medians: a noisy moment of the machine falls on both
                    ours.append((await run_wrk(server.target, f"/route?{ONE}", seconds=3)).rate)
                    theirs.append((await run_wrk(Target("127.0.0.1", reference.port), f"/route?{ONE}", seconds=3)).rate)  # fmt: skip
                print(json.dumps({"figure": "GET /route one rank, wrk -c64 (requests/s, median of 3)",
                                  "aiobootstrap": round(statistics.median(ours)), "reference": round(statistics.median(theirs)),
                                  "ratio": round(statistics.median(ours) / statistics.median(theirs), 2)}))  # fmt: skip
            ours_rooms = await rooms_under_decode(http, server.url, server.pid, waiting=True)
            theirs_rooms = await rooms_under_decode(http, reference.url, None, waiting=False)
            print(json.dumps({"figure": "/query_dp_ranks, 256 rooms, 64 decode workers, 5 s",
                              "aiobootstrap wait= requests": ours_rooms[0], "server CPU s": round(ours_rooms[1], 2),
                              "reference polling requests": theirs_rooms[0], "process CPU s": round(theirs_rooms[1], 2)}))  # fmt: skip
    finally:
        await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    asyncio.run(main(parser.parse_args().quick))
