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

Two more, aiobootstrap against itself or the reference:

- **``GET /route`` with all four ``-1``** (decode's parallel info) under
  ``wrk -c64``: requests a second, against the reference's;
- **registering a 4,096-rank topology** (``PUT /route`` one rank after the
  other on one connection, a decode parked on the topology with ``wait=``)
  against **4,096 engine-info registrations** the same way: wall time and
  server CPU, the ratio per round.

``python -m bench.prefill`` (``--quick``: fewer runs; ``--only route,all,...``:
some of them; ``--rounds N``: the rounds taken in turn; ``--before TREE``:
also serve another checkout's ``python -m aiobootstrap`` in the same turns);
aiobootstrap runs as ``python -m aiobootstrap`` in a process of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from ._data import registration, weights
from ._servers import SERVERS, RunningServer, cpu_clock_seconds, cpu_seconds, start_in_tree
from ._wire import Target, connect, get_request, put_request
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


FIGURES = ("learn", "route", "all", "rooms", "topology")
"""What ``--only`` may name: decode learning the topology, one rank's and the parallel info's ``GET /route``
under ``wrk``, the rooms' query, and a 4,096-rank topology's registration."""


class Before:
    """Another checkout's ``python -m aiobootstrap`` (``--before TREE``), in a process of its own."""

    def __init__(self, process: asyncio.subprocess.Process, url: str) -> None:
        self.process, self.url = process, url
        self.target = Target.from_url(url)
        self.pid = process.pid

    @classmethod
    async def start(cls, tree: Path) -> Before:
        argv = ["-m", "aiobootstrap", "--port", "0", "--log-level", "warning"]
        process, url = await start_in_tree(
            "before", tree, argv, "aiobootstrap listening on ", log="prefill", env=dict(os.environ)
        )
        return cls(process, url)

    async def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        await self.process.wait()


async def wrk_in_turn(targets: dict[str, Target], path: str, rounds: int) -> dict[str, list[float]]:
    """``wrk -t1 -c64`` for 3 s on each target, ``rounds`` times, the order reversed every other round."""
    rates: dict[str, list[float]] = {name: [] for name in targets}
    for index in range(rounds):
        order = list(targets.items()) if index % 2 == 0 else list(targets.items())[::-1]
        for name, target in order:
            result = await run_wrk(target, path, seconds=3)
            if result.errors.get("status") or result.requests == 0:
                raise RuntimeError(f"{name}: GET {path} under wrk: {result.errors}")
            rates[name].append(result.rate)
    return rates


def _print_rates(figure: str, rates: dict[str, list[float]]) -> None:
    """Medians of each target, and the paired ratio (round by round) of each to the reference."""
    reference = rates["reference"]
    line: dict[str, Any] = {"figure": figure, "rounds": len(reference)}
    for name, values in rates.items():
        line[name] = round(statistics.median(values))
    for name, values in rates.items():
        if name != "reference":
            paired = [ours / theirs for ours, theirs in zip(values, reference, strict=True)]
            line[f"{name} / reference"] = round(statistics.median(values) / statistics.median(reference), 3)
            line[f"{name} / reference, paired"] = round(statistics.median(paired), 3)
            line[f"{name} / reference, range"] = [round(min(paired), 3), round(max(paired), 3)]
    print(json.dumps(line))


TOPOLOGY_DP, TOPOLOGY_TP = 512, 8
"""The 4,096-rank topology registered (dp x tp; one cp, one pp)."""


def _topology_puts(namespace: str) -> list[bytes]:
    path = f"/ns/{namespace}/route"
    bodies = []
    for dp in range(TOPOLOGY_DP):
        for tp in range(TOPOLOGY_TP):
            value = rank(tp, dp) | {
                "attn_tp_size": TOPOLOGY_TP, "attn_dp_size": TOPOLOGY_DP,
                "rank_ip": f"10.{dp >> 8}.{dp & 255}.{tp}", "rank_port": 17000 + tp,
            }  # fmt: skip
            bodies.append(put_request(path, json.dumps(value).encode()))
    return bodies


_INFO = weights(4)


def _info_puts(namespace: str) -> list[bytes]:
    path = f"/ns/{namespace}/register_transfer_engine_info"
    return [put_request(path, registration(r, _INFO)) for r in range(TOPOLOGY_DP * TOPOLOGY_TP)]


async def _sequential(
    target: Target, pid: int, requests: list[bytes], waiter: bytes | None
) -> tuple[float, float]:
    """``requests`` one after the other on one connection (``waiter`` parked first, its 200 awaited after):
    wall seconds from the first sent to the last answer, and the server's CPU seconds meanwhile."""
    connection = await connect(target)
    await connection.request(get_request("/health"))
    parked = None
    if waiter is not None:
        decode = await connect(target)
        parked = decode.send(waiter)
        await asyncio.sleep(0.05)
    cpu, wall = cpu_clock_seconds(pid), time.perf_counter()
    for request in requests:
        reply = await connection.request(request)
        if reply.status != 200:
            raise RuntimeError(f"a registration answered {reply.status}: {reply.body[:200]!r}")
    if parked is not None:
        answer = await parked
        if answer.status != 200:
            raise RuntimeError(f"the parked decode answered {answer.status}: {answer.body[:200]!r}")
    wall, cpu = time.perf_counter() - wall, cpu_clock_seconds(pid) - cpu
    connection.close()
    if parked is not None:
        decode.close()
    return wall, cpu


async def topology_in_turn(servers: dict[str, tuple[Target, int]], rounds: int) -> None:
    """Per server, ``rounds`` rounds of: a 4,096-rank topology registered with a decode parked on it, and
    4,096 engine-info registrations, each in a fresh namespace, the two in turn (order swapped every round)."""
    results: dict[str, dict[str, list[tuple[float, float]]]] = {
        name: {"topology": [], "infos": []} for name in servers
    }
    for index in range(rounds):
        order = list(servers.items()) if index % 2 == 0 else list(servers.items())[::-1]
        for name, (target, pid) in order:
            topology = (
                "topology",
                _topology_puts(f"t{index}"),
                get_request(f"/ns/t{index}/route?{ALL}&wait=600"),
            )
            infos = ("infos", _info_puts(f"i{index}"), None)
            for figure, requests, waiter in (topology, infos) if index % 2 == 0 else (infos, topology):
                results[name][figure].append(await _sequential(target, pid, requests, waiter))
    for name, figures in results.items():
        walls = [t[0] / i[0] for t, i in zip(figures["topology"], figures["infos"], strict=True)]
        cpus = [t[1] / i[1] for t, i in zip(figures["topology"], figures["infos"], strict=True)]
        print(json.dumps({
            "figure": f"register {TOPOLOGY_DP * TOPOLOGY_TP} prefill ranks (a decode parked) vs as many engine infos",
            "server": name, "rounds": rounds,
            "topology s": round(statistics.median(t[0] for t in figures["topology"]), 3),
            "infos s": round(statistics.median(i[0] for i in figures["infos"]), 3),
            "wall ratio, paired median": round(statistics.median(walls), 3),
            "wall ratio, range": [round(min(walls), 3), round(max(walls), 3)],
            "server CPU ratio, paired median": round(statistics.median(cpus), 3),
        }))  # fmt: skip


async def main(quick: bool, only: set[str], rounds: int, before: Path | None) -> None:
    runs = 6 if quick else 20
    server = await RunningServer.start(SERVERS["aiobootstrap"])
    old = None if before is None else await Before.start(before)
    reference = Reference()
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            if "learn" in only:
                waited = [await learn_topology(http, server.url, waiting=True) for _ in range(runs)]
                polled = [await learn_topology(http, reference.url, waiting=False) for _ in range(runs)]
                print(json.dumps({"figure": "decode learns the topology (s from the last rank's 200)",
                                  "aiobootstrap wait= p50": statistics.median(waited), "max": max(waited),
                                  "reference 1 s poll p50": statistics.median(polled), "max ": max(polled)}))  # fmt: skip
            targets = {"aiobootstrap": server.target, "reference": Target("127.0.0.1", reference.port)}
            if old is not None:
                targets["before"] = old.target
            if only & {"route", "all"}:
                for base in (server.url, reference.url, *(() if old is None else (old.url,))):
                    await http.delete(f"{base}/route?{ALL}")
                    for tp, dp in ((0, 0), (1, 0), (0, 1), (1, 1)):
                        await (await http.put(f"{base}/route", json=rank(tp, dp))).read()
            if find_wrk():
                if "route" in only:
                    rates = await wrk_in_turn(targets, f"/route?{ONE}", rounds)
                    _print_rates("GET /route one rank, wrk -t1 -c64 3 s (requests/s, medians)", rates)
                if "all" in only:
                    rates = await wrk_in_turn(targets, f"/route?{ALL}", rounds)
                    _print_rates(
                        "GET /route all four -1 (parallel info), wrk -t1 -c64 3 s (requests/s, medians)",
                        rates,
                    )
            if "rooms" in only:
                ours_rooms = await rooms_under_decode(http, server.url, server.pid, waiting=True)
                theirs_rooms = await rooms_under_decode(http, reference.url, None, waiting=False)
                print(json.dumps({"figure": "/query_dp_ranks, 256 rooms, 64 decode workers, 5 s",
                                  "aiobootstrap wait= requests": ours_rooms[0], "server CPU s": round(ours_rooms[1], 2),
                                  "reference polling requests": theirs_rooms[0], "process CPU s": round(theirs_rooms[1], 2)}))  # fmt: skip
            if "topology" in only:
                servers = {"aiobootstrap": (server.target, server.pid)}
                if old is not None:
                    servers["before"] = (old.target, old.pid)
                await topology_in_turn(servers, max(1, rounds))
    finally:
        await server.stop()
        if old is not None:
            await old.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", default=",".join(FIGURES), help=f"a comma-separated subset of {', '.join(FIGURES)}"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of each throughput and topology figure, in turn"
    )
    parser.add_argument(
        "--before", type=Path, help="also serve this checkout's python -m aiobootstrap, in turn"
    )
    args = parser.parse_args()
    chosen = set(args.only.split(","))
    if chosen - set(FIGURES):
        parser.error(
            f"--only names {', '.join(sorted(chosen - set(FIGURES)))}: not one of {', '.join(FIGURES)}"
        )
    before = None if args.before is None else args.before.resolve()
    asyncio.run(main(args.quick, chosen, args.rounds, before))
