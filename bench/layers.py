"""Where a lone registration and a one-waiter wake-up spend the server's CPU, layer by layer, against the floor.

``python -m bench.layers`` starts three servers, each in its own process:

- ``app``: ``python -m aiobootstrap --port 0`` (default config: memory store, log level info);
- ``app-warn``: the same with ``--log-level warning`` (what ``make bench`` runs);
- ``floor``: the thinnest aiohttp server on the same loop (uvloop when installed) and collector
  settings: one ``PUT`` that reads the body, parses it with the same codec, keeps it and answers
  ``OK``; one ``GET ...&wait=`` that parks on an ``asyncio.Event`` per rank and answers the info as
  JSON. No middleware, no metrics, no boot header, no access log.

Then, taking turns between the servers (so all see the same machine load):

1. ``--rounds`` rounds of ``--puts`` sequential registrations of fresh ranks on one keep-alive
   connection (a ``--tensors`` info: 4 by default, ~0.5 KB; 1000 is ``make bench``'s 60 KB one): the server's CPU per registration from
   ``/proc/PID/task/*/schedstat`` (nanoseconds);
2. ``--trials`` one-waiter wake-ups (a lean long-poll parked on a fresh rank, then one ``PUT``):
   the server's CPU from just before the ``PUT`` to the waiter's reply, and the delay from the
   ``PUT`` leaving the client to the waiter's first byte (and to the registration's own: this client,
   woken by one, reads it before it looks at the other connection, tens of µs).

Medians are printed with their ratio to the floor. Last, each server is traced (``--trace-puts``
registrations, ``--trace-trials`` wake-ups) by a ``sys.setprofile`` hook switched on by a signal:
every Python call and C call is counted, and the server thread's CPU time between two events is
charged to the innermost aiobootstrap frame on the stack (its layer: middleware, body read, wire
parse, registry, store, change feed, metrics, logging...); time with no Python frame is the loop's
own (uvloop, the kernel's recv/send/epoll). Call counts are exact and do not move with load; the
traced times are inflated by the hook and are printed scaled to the untraced CPU per operation.
``--json PATH`` writes every figure. ``--before TREE`` also serves ``app-before`` and
``app-warn-before`` from another checkout (``git worktree add /tmp/before COMMIT``), traced by this
tree's tracer, taking turns with the others; the report adds this tree's ratio to it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from ._data import registration, weights
from ._servers import cpu_ns, start_in_tree
from ._wire import Target, connect, get_request, put_request

ROOT = Path(__file__).resolve().parent.parent
REGISTER = "/register_transfer_engine_info"
FLOOR_BANNER = "floor listening on "
APP_BANNER = "aiobootstrap listening on "

# -- the tracer (runs inside a server process) -------------------------------------------

_PKG = os.sep + "aiobootstrap" + os.sep
_SPECIAL = {
    ("server/app.py", "_slash_redirect"): "mw: slash redirect",
    ("server/app.py", "_boot_header"): "boot header (on_response_prepare)",
    ("server/metrics.py", "metrics_middleware"): "mw: metrics",
    ("server/metrics.py", "observe_answer"): "mw: metrics",
    ("server/front.py", "front"): "mw: front (redirect, timing, errors)",
    ("server/metrics.py", "observe_request"): "mw: metrics",
    ("server/fastpath/gets.py", "delivered"): "feed: ReplyWire.delivered",
    ("server/fastpath/gets.py", "_answer"): "wake: ReplyWire._answer (early write)",
    ("server/fastpath/gets.py", "write"): "wake: ReplyWire._answer (early write)",
    ("server/fastpath/gets.py", "expect"): "get: expect/settle",
    ("server/fastpath/gets.py", "settle"): "get: expect/settle",
    ("core/registry/__init__.py", "changed"): "feed: Registry.changed/_deliver",
    ("core/registry/__init__.py", "_deliver"): "feed: Registry.changed/_deliver",
    ("core/registry/__init__.py", "_tell"): "feed: Registry.changed/_deliver",
}
_WRAPPER = "\0wrapper"
_MODULES = [  # first prefix that matches (relative to aiobootstrap/)
    ("server/errors.py", "mw: error"),
    ("server/auth.py", "mw: auth"),
    ("server/access.py", "mw: auth"),
    ("server/metrics.py", "metrics counting"),
    ("server/body.py", "body read (server/body.py)"),
    ("server/faces/engine_info/log_lines.py", "logging"),
    ("_logging.py", "logging"),
    ("server/faces/", "handler glue (faces: routes, common, kinds, records)"),
    ("server/fastpath/writes.py", "reply write (writes.write: transport.write, send)"),
    ("server/fastpath/watches.py", "feed: WatchWire.changed"),
    ("server/fastpath/", "reply (WireReply, ReplyWire)"),
    ("server/connections.py", "connection table (handle_tracked)"),
    ("cli/", _WRAPPER),
    ("_json.py", "json codec (_json)"),
    ("wire/", "wire: parse/validate"),
    ("_ranks.py", "wire: parse/validate"),
    ("_names.py", "wire: parse/validate"),
    ("core/registry/", "registry"),
    ("core/parking.py", "registry"),
    ("core/history/", "feed: history"),
    ("core/tally.py", "tally"),
    ("store/leases.py", "store: leases"),
    ("store/local_leases.py", "store: leases"),
    ("store/lease_entries.py", "store: leases"),
    ("store/", "store (memory, tables)"),
    ("server/", "server: other"),
    ("", "aiobootstrap: other"),
]
_FLOOR_LAYER = "floor handler"
_AIOHTTP = "aiohttp (parse, dispatch, response, write)"
_TOP = "\0top"  # the loop's own frames (asyncio.Runner.run, a stdlib Handle._run): no layer above
_WRAPPER_LABELS = {"connection table (handle_tracked)"}
_OUTSIDE = "asyncio/stdlib outside any layer (Task steps, futures)"
_LOOP = "loop in C (uvloop, recv/send/epoll)"


def _label(code: CodeType) -> str | None:
    filename = code.co_filename
    if filename.endswith(os.sep + "asyncio" + os.sep + "runners.py") or (
        filename.endswith(os.sep + "asyncio" + os.sep + "events.py") and code.co_name == "_run"
    ):
        return _TOP
    if os.sep + "aiohttp" + os.sep in filename:
        return _AIOHTTP
    if filename.endswith(os.sep + "bench" + os.sep + "layers.py"):
        return _FLOOR_LAYER if code.co_name.startswith("floor_") else _WRAPPER
    at = filename.rfind(_PKG)
    if at < 0 or ".venv" in filename[:at]:
        return None
    relative = filename[at + len(_PKG) :].replace(os.sep, "/")
    special = _SPECIAL.get((relative, code.co_name))
    if special is not None:
        return special
    return next(label for prefix, label in _MODULES if relative.startswith(prefix))


class Tracer:
    """Counts calls and charges thread CPU to layers; on and off by signals (SIGUSR1, SIGUSR2)."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.dumps = 0
        self._labels: dict[CodeType, str | None] = {}
        self._reset()

    def _reset(self) -> None:
        self.calls: Counter[str] = Counter()
        self.ns: Counter[str] = Counter()
        self.fcalls: Counter[str] = Counter()
        self.fns: Counter[str] = Counter()
        self._layer = _LOOP
        self._func = "<loop>"
        self._last = 0

    def _layer_of(self, frame: FrameType | None) -> str:
        # The innermost frame with a layer: aiobootstrap's modules, aiohttp, the floor's handlers. A
        # wrapper around aiohttp's handling (handle_tracked) claims only what it calls itself.
        labels = self._labels
        start = frame
        while frame is not None:
            code = frame.f_code
            label = labels.get(code, "?")
            if label == "?":
                label = labels[code] = _label(code)
            if label is not None:
                if label in (_TOP, _WRAPPER):
                    return _OUTSIDE
                if label in _WRAPPER_LABELS and start is not None and frame is not start:
                    # reached through an aiohttp frame? then it is aiohttp's
                    return label if _direct(start, frame, labels) else _AIOHTTP
                return label
            frame = frame.f_back
        return _OUTSIDE

    def _top(self, code: CodeType) -> bool:
        label = self._labels.get(code, "?")
        if label == "?":
            label = self._labels[code] = _label(code)
        return label == _TOP

    def _hook(self, frame: FrameType, event: str, arg: Any) -> None:
        now = time.thread_time_ns()
        spent = now - self._last
        self.ns[self._layer] += spent
        self.fns[self._func] += spent
        if event == "call":
            layer, func = self._layer_of(frame), _name(frame.f_code)
            self.calls[layer] += 1
            self.fcalls[func] += 1
        elif event == "c_call":
            layer, func = self._layer_of(frame), f"<{getattr(arg, '__qualname__', arg)}>"
            self.calls[layer] += 1
            self.fcalls[func] += 1
        elif event == "return":
            back = frame.f_back
            if back is None or self._top(back.f_code):
                layer, func = _LOOP, "<loop>"
            else:
                layer, func = self._layer_of(back), _name(back.f_code)
        else:  # c_return, c_exception: back in the calling frame
            layer, func = self._layer_of(frame), _name(frame.f_code)
        self._layer, self._func = layer, func
        self._last = time.thread_time_ns()

    def on(self, *_: object) -> None:
        self._reset()
        self._last = time.thread_time_ns()
        sys.setprofile(self._hook)

    def off(self, *_: object) -> None:
        sys.setprofile(None)
        path = f"{self.out}-{self.dumps}.json"
        self.dumps += 1
        Path(path).write_text(
            json.dumps({"calls": self.calls, "ns": self.ns, "fcalls": self.fcalls, "fns": self.fns})
        )


def _direct(start: FrameType, wrapper: FrameType, labels: dict[CodeType, str | None]) -> bool:
    frame: FrameType | None = start
    while frame is not None and frame is not wrapper:
        if labels.get(frame.f_code) is not None:
            return False
        frame = frame.f_back
    return True


def _name(code: CodeType) -> str:
    filename = code.co_filename
    at = filename.rfind("site-packages" + os.sep)
    short = filename[at + 14 :] if at >= 0 else filename.rpartition(_PKG)[2] or filename
    return f"{short}:{code.co_firstlineno}({code.co_qualname})"


def _install_tracer(out: str) -> None:
    tracer = Tracer(out)
    signal.signal(signal.SIGUSR1, tracer.on)
    signal.signal(signal.SIGUSR2, tracer.off)


# -- the floor server ----------------------------------------------------------------------


def floor_main(argv: list[str]) -> int:
    """The thinnest aiohttp registry: read, parse, keep, answer; a long-poll on an Event per rank."""
    from aiohttp import web

    from aiobootstrap import _json
    from aiobootstrap.cli.gc import tune_collector
    from aiobootstrap.cli.main import loop_factory

    infos: dict[int, Any] = {}
    events: dict[int, asyncio.Event] = {}

    async def floor_put(request: web.Request) -> web.Response:
        payload = _json.loads(await request.read())
        rank = payload["rank"]
        infos[rank] = payload["transfer_engine_info"]
        event = events.pop(rank, None)
        if event is not None:
            event.set()
        return web.Response(text="OK")

    async def floor_get(request: web.Request) -> web.Response:
        rank = int(request.query["rank"])
        if rank not in infos:
            event = events.get(rank)
            if event is None:
                event = events[rank] = asyncio.Event()
            try:
                async with asyncio.timeout(float(request.query.get("wait", "0"))):
                    await event.wait()
            except TimeoutError:
                return web.Response(status=404, text="not registered")
        return web.Response(body=_json.dumps(infos[rank]), content_type="application/json")

    async def floor_serve() -> None:
        app = web.Application()
        app.router.add_put(REGISTER, floor_put)
        app.router.add_get("/get_transfer_engine_info", floor_get)
        app.router.add_get("/health", lambda _: _ok())
        runner = web.AppRunner(app, handle_signals=False, handler_cancellation=True, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        print(f"{FLOOR_BANNER}http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await runner.cleanup()

    async def _ok() -> web.Response:
        return web.Response(text="OK")

    tune_collector()
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(floor_serve())
    return 0


def serve_main(argv: list[str]) -> int:
    """``serve OUT app|floor ARGS``: a server with the tracer installed."""
    out, which, rest = argv[0], argv[1], argv[2:]
    _install_tracer(out)
    if which == "floor":
        return floor_main(rest)
    from aiobootstrap.cli.main import main

    return main(rest)


# -- the driver ---------------------------------------------------------------------------


class Server:
    def __init__(self, label: str, process: asyncio.subprocess.Process, url: str, out: str) -> None:
        self.label, self.process, self.out = label, process, out
        host, _, port = url.rpartition("//")[2].rpartition(":")
        self.target = Target(host, int(port))
        self.rank = 0
        self.dumps = 0

    @classmethod
    async def start(cls, label: str, argv: list[str], out_dir: Path, tree: Path | None = None) -> Server:
        """A server of this tree's aiobootstrap, or of ``tree``'s (this tree's tracer and floor either way)."""
        out = str(out_dir / label)
        which = "floor" if label == "floor" else "app"
        banner = FLOOR_BANNER if which == "floor" else APP_BANNER
        serve = ["serve", out, which, *argv]
        if tree is None:
            process, url = await start_in_tree(
                label, ROOT, ["-m", "bench.layers", *serve], banner, log="layers"
            )
        else:
            boot = _BEFORE_BOOT.format(tree=str(tree), root=str(ROOT))
            process, url = await start_in_tree(label, tree, ["-c", boot, *serve], banner, log="layers")
        return cls(label, process, url, out)

    def fresh(self, count: int = 1) -> int:
        rank, self.rank = self.rank, self.rank + count
        return rank

    def cpu_ns(self) -> int:
        return cpu_ns(self.process.pid)

    async def traced(self) -> dict[str, Counter[str]]:
        """Turn the tracer off, read what it wrote."""
        self.process.send_signal(signal.SIGUSR2)
        path = Path(f"{self.out}-{self.dumps}.json")
        self.dumps += 1
        async with asyncio.timeout(10):
            while not path.exists():  # noqa: ASYNC110, ASYNC240
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.05)
        data = json.loads(path.read_text())  # noqa: ASYNC240
        return {key: Counter(value) for key, value in data.items()}

    async def trace_on(self) -> None:
        self.process.send_signal(signal.SIGUSR1)
        await asyncio.sleep(0.05)

    async def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        await self.process.wait()


# The package imported from the other tree first; then this tree's bench (its tracer, its labels).
_BEFORE_BOOT = (
    "import sys; sys.path.insert(0, {tree!r}); import aiobootstrap; sys.path[0] = {root!r}; "
    "from bench.layers import main; raise SystemExit(main())"
)

_BODY: dict[str, Any] = weights(4)


async def puts(server: Server, count: int) -> tuple[float, float]:
    """``count`` sequential registrations of fresh ranks: server CPU µs and wall µs per registration."""
    first = server.fresh(count)
    requests = [put_request(REGISTER, registration(first + i, _BODY)) for i in range(count)]
    connection = await connect(server.target)
    await connection.request(get_request("/health"))
    cpu, wall = server.cpu_ns(), time.perf_counter()
    for request in requests:
        reply = await connection.request(request)
        if reply.status != 200:
            raise RuntimeError(f"{server.label}: registration answered {reply.status}: {reply.body[:200]!r}")
    wall, cpu = time.perf_counter() - wall, server.cpu_ns() - cpu
    connection.close()
    return cpu / 1e3 / count, wall * 1e6 / count


async def wake(server: Server, trace: bool = False) -> tuple[float, float, float]:
    """One waiter parked on a fresh rank, then its registration: server CPU µs, PUT sent → waiter's byte ms,
    PUT sent → the registration's own first byte ms."""
    rank = server.fresh()
    waiter = await connect(server.target, keep_body=False)
    registrar = await connect(server.target)
    await registrar.request(get_request("/health"))
    reply = waiter.send(get_request(f"/get_transfer_engine_info?rank={rank}&wait=60"))
    await asyncio.sleep(0.03)
    if trace:
        await server.trace_on()
    cpu = server.cpu_ns()
    answer = await registrar.request(put_request(REGISTER, registration(rank, _BODY)))
    woken = await reply
    cpu = server.cpu_ns() - cpu
    if answer.status != 200 or woken.status != 200:
        raise RuntimeError(f"{server.label}: wake on rank {rank}: {answer.status}, {woken.status}")
    waiter.close()
    registrar.close()
    return (
        cpu / 1e3,
        (woken.first_byte_at - answer.sent_at) * 1e3,
        (answer.first_byte_at - answer.sent_at) * 1e3,
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240
    for old in out_dir.glob("*.json"):  # noqa: ASYNC240
        old.unlink()
    specs = {"app": ["--port", "0"], "app-warn": ["--port", "0", "--log-level", "warning"], "floor": []}
    servers = [await Server.start(label, argv, out_dir) for label, argv in specs.items()]
    if args.before:
        for label in ("app", "app-warn"):
            servers.append(await Server.start(f"{label}-before", specs[label], out_dir, Path(args.before)))
    results: dict[str, Any] = {"args": vars(args), "puts": {}, "wake": {}, "traces": {}}
    try:
        for server in servers:  # warm: caches, first-registration paths
            await puts(server, 200)
            await wake(server)
        for index in range(args.rounds):
            order = servers if index % 2 == 0 else servers[::-1]
            for server in order:
                cpu, wall = await puts(server, args.puts)
                results["puts"].setdefault(server.label, []).append({"cpu_us": cpu, "wall_us": wall})
        for index in range(args.trials):
            order = servers if index % 2 == 0 else servers[::-1]
            for server in order:
                cpu, ms, own = await wake(server)
                row = {"cpu_us": cpu, "sent_to_byte_ms": ms, "sent_to_own_byte_ms": own}
                results["wake"].setdefault(server.label, []).append(row)
        for server in servers:
            await server.trace_on()
            await puts(server, args.trace_puts)
            put_trace = await server.traced()
            wake_traces = []
            for _ in range(args.trace_trials):
                await wake(server, trace=True)
                wake_traces.append(await server.traced())
            woke = {key: sum((t[key] for t in wake_traces), Counter()) for key in wake_traces[0]}
            results["traces"][server.label] = {
                "put": _per_op(put_trace, args.trace_puts),
                "wake": _per_op(woke, args.trace_trials),
            }
    finally:
        for server in servers:
            await server.stop()
    _report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))  # noqa: ASYNC240
    return results


def _per_op(trace: dict[str, Counter[str]], ops: int) -> dict[str, dict[str, float]]:
    return {key: {name: value / ops for name, value in counter.items()} for key, counter in trace.items()}


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def _report(results: dict[str, Any]) -> None:
    floor_put = _median(results["puts"]["floor"], "cpu_us")
    floor_wake = _median(results["wake"]["floor"], "cpu_us")
    floor_ms = _median(results["wake"]["floor"], "sent_to_byte_ms")
    print(
        f"\nmedians of {len(results['puts']['floor'])} rounds (puts) / {len(results['wake']['floor'])} trials (wake)"
    )
    print(
        f"{'server':>15} | put CPU µs | ÷floor | put wall µs | wake CPU µs | ÷floor | PUT sent→waiter byte ms | ÷floor"
        " | PUT sent→its own byte ms"
    )
    for label in results["puts"]:
        put_cpu = _median(results["puts"][label], "cpu_us")
        put_wall = _median(results["puts"][label], "wall_us")
        wake_cpu = _median(results["wake"][label], "cpu_us")
        wake_ms = _median(results["wake"][label], "sent_to_byte_ms")
        own_ms = _median(results["wake"][label], "sent_to_own_byte_ms")
        print(
            f"{label:>15} | {put_cpu:10.1f} | {put_cpu / floor_put:5.2f}× | {put_wall:11.1f} | {wake_cpu:11.1f} | "  # noqa: RUF001
            f"{wake_cpu / floor_wake:5.2f}× | {wake_ms:23.3f} | {wake_ms / floor_ms:5.2f}× | {own_ms:24.3f}"  # noqa: RUF001
        )
    for label in ("app", "app-warn"):
        if f"{label}-before" not in results["puts"]:
            continue
        ratios = []
        for figure, key in (("puts", "cpu_us"), ("wake", "cpu_us"), ("wake", "sent_to_byte_ms")):
            after = _median(results[figure][label], key)
            ratios.append(after / _median(results[figure][f"{label}-before"], key))
        before_calls = sum(results["traces"][f"{label}-before"]["put"]["calls"].values())
        after_calls = sum(results["traces"][label]["put"]["calls"].values())
        print(
            f"{label} after ÷ before: put CPU {ratios[0]:.3f}×, wake CPU {ratios[1]:.3f}×, "  # noqa: RUF001
            f"PUT sent→waiter byte {ratios[2]:.3f}×; put calls {before_calls:.0f} → {after_calls:.0f}"  # noqa: RUF001
        )
    for op, figure in (("put", "puts"), ("wake", "wake")):
        for label, traces in results["traces"].items():
            trace = traces[op]
            cpu = _median(results[figure][label], "cpu_us")
            total_ns = sum(trace["ns"].values())
            scale = cpu * 1e3 / total_ns if total_ns else 0.0
            calls = sum(trace["calls"].values())
            print(
                f"\n{op} on {label}: {calls:.0f} calls per op; traced µs scaled to the untraced {cpu:.1f} µs"
            )
            print(f"  {'layer':<44} {'calls':>7} {'µs':>7}")
            for layer in sorted(trace["ns"], key=lambda name: -trace["ns"][name]):
                print(
                    f"  {layer:<44} {trace['calls'].get(layer, 0):7.1f} {trace['ns'][layer] * scale / 1e3:7.2f}"
                )
            print("  top functions by self time (µs scaled, calls):")
            for func in sorted(trace["fns"], key=lambda name: -trace["fns"][name])[:25]:
                print(
                    f"    {trace['fns'][func] * scale / 1e3:6.2f} {trace['fcalls'].get(func, 0):6.1f}  {func}"
                )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        return serve_main(sys.argv[2:])
    parser = argparse.ArgumentParser(
        prog="python -m bench.layers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--puts", type=int, default=2000, help="registrations per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=21, help="one-waiter wake-ups per server")
    parser.add_argument("--trace-puts", type=int, default=300)
    parser.add_argument("--trace-trials", type=int, default=20)
    parser.add_argument("--tensors", type=int, default=4, help="tensors of each registered info (4: ~0.5 KB)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "layers"))
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument(
        "--before",
        help="also serve app and app-warn from this tree (a checkout of an older commit, "
        "e.g. git worktree add /tmp/before e476508), taking turns with this tree's",
    )
    args = parser.parse_args()
    global _BODY
    _BODY = weights(args.tensors)
    if args.before:
        args.before = str(Path(args.before).resolve())
    from aiobootstrap.cli.main import loop_factory

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
