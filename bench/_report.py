"""Turning results into the side-by-side table, docs/benchmarks.md and the plot."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Figure", "figures", "machine", "table", "write_docs"]

BEGIN = "<!-- bench:results:begin (written by `make bench`; edit outside these markers) -->"
END = "<!-- bench:results:end -->"
PLOT = "benchmarks.png"
_SHORT = {
    "aiobootstrap": "aiobootstrap (orjson + uvloop)",
    "reference": "reference (FastAPI + uvicorn)",
    "plain": "aiobootstrap, neither",
    "orjson": "aiobootstrap, orjson only",
    "uvloop": "aiobootstrap, uvloop only",
}


@dataclass(frozen=True, slots=True)
class Figure:
    """One line of the table: our figure, its baseline, and the target."""

    name: str
    value: float | None
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    target: str = ""
    met: bool | None = None
    lower_is_better: bool = True

    @property
    def ratio(self) -> str:
        if self.value is None or self.baseline is None or self.value <= 0 or self.baseline <= 0:
            return ""
        ratio = self.baseline / self.value if self.lower_is_better else self.value / self.baseline
        return f"{ratio:,.1f}×" if ratio < 100 else f"{ratio:,.0f}×"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.partition(":")[2].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, {platform.system()} {platform.release()}"


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "req/s":
        return f"{value:,.0f} req/s"
    if unit == "ms":
        return f"{value:,.2f} ms" if value < 10 else f"{value:,.0f} ms"
    if unit == "s":
        return f"{value:,.3f} s" if value < 10 else f"{value:,.1f} s"
    if unit in ("KB", "MB"):
        return f"{value:,.1f} {unit}"
    return f"{value:,.2f}".rstrip("0").rstrip(".") + (f" {unit}" if unit else "")


def _cpu(milliseconds: float | None) -> str:
    if milliseconds is None:
        return ""
    # /proc counts CPU time in 10 ms ticks.
    return "< 10 ms" if milliseconds < 10 else _fmt(milliseconds, "ms")


def figures(results: dict[str, Any]) -> list[Figure]:
    """The issue's figures, in its order, from whatever scenarios ran."""
    rows: list[Figure] = []
    wake = results.get("wake")
    if wake is not None:
        long_poll, polling = wake["long_poll"], wake["polling"]
        single = long_poll[1]
        rows.append(
            Figure(
                f"1 waiter: registration sent → first reply byte (median of {single['n']})",
                single["p50_ms"],
                "ms",
                polling[1]["p50_ms"],
                "polling",
                "≤ 0.5 ms",
                single["p50_ms"] <= 0.5,
            )
        )
        targets = {(1000, "p50"): 12.0, (1000, "p99"): 25.0}
        for crowd in sorted(k for k in long_poll if k != 1):
            for stat in ("p50", "p99"):
                ours, target = long_poll[crowd][f"{stat}_ms"], targets.get((crowd, stat))
                rows.append(
                    Figure(
                        f"{crowd:,} waiters on one rank: {stat}",
                        ours,
                        "ms",
                        polling[crowd][f"{stat}_ms"],
                        "polling",
                        f"≤ {target:g} ms" if target else "",
                        ours <= target if target else None,
                    )
                )
        if 1000 in long_poll:
            cpu = long_poll[1000]["server_cpu_ms"]
            each = cpu * 1e3 / 1000
            rows.append(
                Figure(f"  server CPU for that wake-up (median; {each:.0f} µs per waiter)", cpu, "ms")
            )
        per_waiter = max(long_poll[k]["requests_per_waiter"] for k in long_poll)
        biggest = max(polling)
        rows.append(
            Figure(
                f"requests per waiting getter (up to {biggest:,} waiters)",
                per_waiter,
                "",
                polling[biggest]["requests_per_waiter"],
                "polling (mean)",
                "exactly 1",
                per_waiter == 1,
            )
        )
    throughput = results.get("throughput")
    if throughput is not None:
        generator = "wrk" if "wrk" in throughput.get("load_generator", "") else "Python load"
        for load, label, factor in (
            ("get_small", f"GET, small info (~250 B), {generator} -c64", 8.0),
            ("put_32", f"PUT, 32-tensor info (~2 KB), {generator} -c64", 3.5),
            ("get_real", f"GET, realistic info (1,000 tensors, ~60 KB), {generator} -c64", 20.0),
            ("put_real", f"PUT, realistic info (~60 KB), {generator} -c64", 4.0),
        ):
            if load not in throughput["aiobootstrap"]:
                continue
            ours, theirs = throughput["aiobootstrap"][load]["rps"], throughput["reference"][load]["rps"]
            rows.append(
                Figure(
                    label,
                    ours,
                    "req/s",
                    theirs,
                    "reference server",
                    f"≥ {factor:g}× reference" if factor else "",
                    ours >= factor * theirs if factor else None,
                    lower_is_better=False,
                )
            )
    broadcast = results.get("broadcast")
    if broadcast is not None:
        ours = broadcast["aiobootstrap"]
        trials = len(ours["last_ms_per_trial"])
        rows.append(
            Figure(
                f"broadcast to {broadcast['waiters']:,} parked waiters: last first byte (median of {trials})",
                ours["last_ms_median"],
                "ms",
                broadcast["plain"]["last_ms_median"],
                "same, stdlib asyncio loop",
                "≤ 120 ms",
                ours["last_ms_median"] <= 120,
            )
        )
        each = ours["server_cpu_us_per_waiter"]
        rows.append(
            Figure(
                f"  server CPU for that wake-up (median; {each:.0f} µs per waiter)",
                ours["server_cpu_ms"],
                "ms",
                broadcast["plain"]["server_cpu_ms"],
                "same, stdlib asyncio loop",
            )
        )
        kb = ours["kib_per_waiter"] * 1.024
        rows.append(Figure("server memory per parked waiter (RSS)", kb, "KB", target="≤ 8 KB", met=kb <= 8))
    gather = results.get("gather")
    if gather is not None:
        batch = gather["batch"]
        rows.append(
            Figure(
                f"gather of {batch['ranks']:,} ranks (~3 KB each), one batch call: "
                "after the last registration",
                # Below zero the consumer held everything before the load generator,
                # busy with 4,096 replies, read the last registration's 200: no gap at all.
                max(0.0, batch["after_last_registration_s"]),
                "s",
                gather["polling"]["after_last_registration_s"],
                "per-rank polling",
                "≤ 0.5 s",
                batch["after_last_registration_s"] <= 0.5,
            )
        )
        rows.append(
            Figure(
                "requests the gathering consumer sent",
                batch["requests"],
                "",
                gather["polling"]["requests"],
                "per-rank polling",
            )
        )
    big = results.get("big_payload")
    if big is not None:
        ours, theirs = big["aiobootstrap"], big.get("reference", {"getters": 0})
        rows.append(
            Figure(
                f"{big['body_bytes'] / 1e6:.0f} MB info, {ours['getters']} concurrent getters: time per get",
                ours["per_get_s"],
                "s",
                theirs.get("per_get_s"),
                f"reference ({theirs['getters']} getters)",
            )
        )
        rows.append(
            Figure(
                f"{big['body_bytes'] / 1e6:.0f} MB info: server peak RSS",
                ours["peak_rss_kib"] / 1024,
                "MB",
                theirs["peak_rss_kib"] / 1024 if "peak_rss_kib" in theirs else None,
                "reference",
            )
        )
    many = results.get("hundred_k")
    if many is not None:
        rows.append(
            Figure(
                f"{many['ranks']:,} ranks: register all + one gather",
                many["total_s"],
                "s",
                100.0 if many["ranks"] >= 96_000 else None,
                "TCPStore, 96K ranks, other hardware" if many["ranks"] >= 96_000 else "",
                "≤ 30 s" if many["ranks"] >= 100_000 else "",
                many["total_s"] <= 30 if many["ranks"] >= 100_000 else None,
            )
        )
        rows.append(Figure(f"{many['ranks']:,} ranks: server peak RSS", many["peak_rss_kib"] / 1024, "MB"))
    rows += _replica_figures(results.get("replicas"))
    return rows


def _replica_figures(replicas: dict[str, Any] | None) -> list[Figure]:
    """Scenario 7: replicas over Redis (AOF always), each beside one in-memory process."""
    if replicas is None:
        return []
    latency = replicas["register_latency"]
    one, crowd = replicas["cross_wake_one"], replicas["cross_wake_1000"]
    rows = [
        Figure(
            "replicas: registration latency, Redis AOF always (p50)",
            latency["redis"]["p50_ms"],
            "ms",
            latency["memory"]["p50_ms"],
            "one process, memory",
        ),
        Figure(
            f"replicas: 1 waiter on B woken through A, after A's 200 (median of {one['n']})",
            one["p50_ms"],
            "ms",
            target="≤ 1 ms",
            met=one["p50_ms"] <= 1.0,
        ),
        Figure(
            "replicas: 1,000 waiters on A and B woken through C: p99",
            crowd["p99_ms"],
            "ms",
            target="≤ 40 ms",
            met=crowd["p99_ms"] <= 40.0,
        ),
    ]
    throughput = replicas["throughput"]
    generator = throughput.get("generator", "python, c=64")
    for load, label in (("get_small", "GET"), ("put_small", "PUT")):
        ours, theirs = throughput["redis"][load], throughput["memory"][load]
        rows.append(
            Figure(
                f"replicas: {label} small info through one replica, {generator}",
                ours["rps"],
                "req/s",
                theirs["rps"],
                "one process, memory",
                "≥ 0.85× memory",
                ours["rps"] >= 0.85 * theirs["rps"],
                lower_is_better=False,
            )
        )
        rows.append(
            Figure(
                f"  CPU per {label}: replica µs (Redis µs: {ours['store_us_per_request']:.0f})",
                ours["server_us_per_request"],
                "",
                theirs["server_us_per_request"],
                "memory process µs",
            )
        )
        two = throughput.get("redis_two")
        if two is not None:
            rows.append(
                Figure(
                    f"replicas: {label} small info through two replicas at once, wrk -c32 each",
                    two[load]["rps"],
                    "req/s",
                    theirs["rps"],
                    "one process, memory",
                    "≥ 1× memory (moonshot)",
                    two[load]["rps"] >= theirs["rps"],
                    lower_is_better=False,
                )
            )
    gather = replicas["gather"]
    rows.append(
        Figure(
            f"replicas: gather of {gather['ranks']:,} ranks on B registered through A, after the last 200",
            max(0.0, gather["after_last_registration_s"]),
            "s",
        )
    )
    return rows


def _met(figure: Figure) -> str:
    if figure.value is not None and figure.value < 0 and figure.unit in ("ms", "s"):
        # A negative time means the clock started late (a waiter answered before
        # the registration's 200): the figure measures nothing, so it meets nothing.
        return "NO (negative time)"
    return {True: "yes", False: "NO", None: ""}[figure.met]


HEADER = ["figure", "aiobootstrap", "baseline", "ratio", "target", "met"]


def _cells(row: Figure) -> list[str]:
    baseline = f"{_fmt(row.baseline, row.unit)} ({row.baseline_name})" if row.baseline is not None else ""
    return [row.name, _fmt(row.value, row.unit), baseline, row.ratio, row.target, _met(row)]


def table(rows: list[Figure]) -> str:
    """A plain-text table for the terminal."""
    header = HEADER
    lines = [_cells(row) for row in rows]
    widths = [max(len(str(line[i])) for line in [header, *lines]) for i in range(len(header))]
    out = [" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    out.append("-+-".join("-" * w for w in widths))
    out += [" | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    return "\n".join(out)


def _markdown_table(header: list[str], lines: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(line) + " |" for line in lines]
    return "\n".join(out)


def _results_markdown(meta: dict[str, Any], results: dict[str, Any], rows: list[Figure]) -> str:
    parts = [
        f"Run of `{meta['command']}` on {meta['when']}: {meta['machine']}, Python {meta['python']}; "
        f"the whole run took {meta['seconds']} s. Shared machine: other work ran beside it, so read "
        "medians and ratios, not single figures.",
        "",
        _markdown_table(HEADER, [_cells(row) for row in rows]),
        "",
        f"![wake-up latency and throughput]({PLOT})",
    ]
    wake = results.get("wake")
    if wake is not None:
        lines = []
        for mode in ("long_poll", "polling"):
            for crowd, s in sorted(wake[mode].items()):
                lines.append(
                    [
                        mode.replace("_", "-"),
                        f"{crowd:,}",
                        str(s["n"]),
                        _fmt(s["p50_ms"], "ms"),
                        _fmt(s["p99_ms"], "ms"),
                        _fmt(s["max_ms"], "ms"),
                        f"{s['requests_per_waiter']:.2f}",
                        _cpu(s.get("server_cpu_ms")),
                    ]
                )
        parts += [
            "",
            "### 1. Wake latency (registration sent → each waiter's first reply byte)",
            "",
            _markdown_table(
                ["client", "waiters", "samples", "p50", "p99", "max", "requests/waiter", "server CPU"], lines
            ),
        ]
    throughput = results.get("throughput")
    if throughput is not None:
        from ._servers import SERVERS

        lines = []
        for name, loads in throughput.items():
            if name in ("info_bytes", "load_generator"):
                continue
            for load, r in loads.items():
                lines.append(
                    [
                        SERVERS[name].label,
                        load.replace("_", " "),
                        f"{r['rps']:,.0f}",
                        _fmt(r["p50_ms"], "ms"),
                        _fmt(r["p99_ms"], "ms"),
                    ]
                )
        sizes = throughput["info_bytes"]
        parts += [
            "",
            "### 2. Throughput at concurrency 64 (server variants, same load generator)",
            "",
            f"Load generator: {throughput.get('load_generator', 'python (bench/_load.py)')}. "
            f"`weights_info_dict` of the small info: {sizes['small']:,} B; 32 tensors: "
            f"{sizes.get('32', 0):,} B; realistic: {sizes['real']:,} B.",
            "",
            _markdown_table(["server", "load", "req/s", "p50", "p99"], lines),
        ]
    codec = results.get("codec")
    if codec is not None:
        lines = [
            [
                f"{label} ({c['bytes']:,} B)",
                f"{c['loads_stdlib_ms']:.3f} ms",
                f"{c['loads_orjson_ms']:.3f} ms",
                f"{c['loads_stdlib_ms'] / c['loads_orjson_ms']:.1f}×",
                f"{c['dumps_stdlib_ms']:.3f} ms",
                f"{c['dumps_orjson_ms']:.3f} ms",
                f"{c['dumps_stdlib_ms'] / c['dumps_orjson_ms']:.1f}×",
            ]
            for label, c in codec.items()
        ]
        parts += [
            "",
            "### Codec: `_json.loads` / `dumps` with orjson vs the stdlib (in process, median)",
            "",
            _markdown_table(
                [
                    "registration body",
                    "loads stdlib",
                    "loads orjson",
                    "gain",
                    "dumps stdlib",
                    "dumps orjson",
                    "gain",
                ],
                lines,
            ),
        ]
    for key, title in (
        ("broadcast", "### 3. Broadcast"),
        ("gather", "### 4. Gather"),
        ("big_payload", "### 5. Big payload"),
        ("hundred_k", "### 6. Many ranks"),
    ):
        if key in results:
            parts += ["", title, "", "```", _flat(results[key]), "```"]
    return "\n".join(parts)


def _flat(data: dict[str, Any], prefix: str = "") -> str:
    lines = []
    for key, value in data.items():
        if isinstance(value, dict):
            lines.append(_flat(value, f"{prefix}{key}."))
        elif isinstance(value, float):
            lines.append(f"{prefix}{key} = {value:,.4g}")
        elif isinstance(value, list) and all(isinstance(item, float) for item in value):
            lines.append(f"{prefix}{key} = [{', '.join(f'{item:,.4g}' for item in value)}]")
        else:
            lines.append(f"{prefix}{key} = {value}")
    return "\n".join(lines)


def write_docs(docs: Path, meta: dict[str, Any], results: dict[str, Any], rows: list[Figure]) -> None:
    """Replace the results between the markers of docs/benchmarks.md; draw the plot."""
    docs.mkdir(exist_ok=True)
    page = docs / "benchmarks.md"
    text = page.read_text() if page.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    page.write_text(f"{head}{BEGIN}\n{_results_markdown(meta, results, rows)}\n{END}{tail}")
    _plot(docs / PLOT, results)


def _plot(path: Path, results: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    wake = results.get("wake")
    if wake is not None:
        for mode, colour in (("long_poll", "tab:blue"), ("polling", "tab:red")):
            crowds = sorted(wake[mode])
            label = mode.replace("_", "-")
            left.plot(
                crowds, [wake[mode][k]["p50_ms"] for k in crowds], "o-", color=colour, label=f"{label} p50"
            )
            left.plot(
                crowds, [wake[mode][k]["p99_ms"] for k in crowds], "s--", color=colour, label=f"{label} p99"
            )
        left.set_xscale("log")
        left.set_yscale("log")
        left.set_xlabel("waiters on one rank")
        left.set_ylabel("registration → first reply byte (ms)")
        left.set_title("Wake latency")
        left.legend(fontsize=8)
        left.grid(True, which="both", alpha=0.3)
    throughput = results.get("throughput")
    if throughput is not None:
        loads = [
            load
            for load in ("get_small", "put_32", "get_real", "put_real")
            if load in throughput["aiobootstrap"]
        ]
        servers = [name for name in throughput if name not in ("info_bytes", "load_generator")]
        width = 0.8 / len(servers)
        for index, name in enumerate(servers):
            right.bar(
                [i + index * width for i in range(len(loads))],
                [throughput[name][load]["rps"] for load in loads],
                width,
                label=_SHORT.get(name, name),
            )
        right.set_xticks(
            [i + 0.4 - width / 2 for i in range(len(loads))], [s.replace("_", " ") for s in loads]
        )
        right.set_yscale("log")
        right.set_ylabel("requests/s, concurrency 64")
        right.set_title("Throughput")
        right.legend(fontsize=8)
        right.grid(True, axis="y", which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
