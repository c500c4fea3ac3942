"""What the tools do with the faces' own records: ``status``'s lines of a namespace's prefill deployment,
Mooncake engines and vLLM workers, ``wait`` for a prefill deployment, and ``get --key``, a Mooncake
metadata key's value.

Each reads one listing of its face (``GET /prefill``, ``/mooncake``, ``/vllm``); a server that predates
the face answers it ``404``, read as "none here".
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from .._logging import printable
from .._names import DEFAULT_ROLE
from ..exceptions import NotRegistered, RankNotRegistered, UnexpectedReply
from .tool_errors import EXIT_ABSENT, ToolError

if TYPE_CHECKING:
    from ..client.client import BootstrapClient

__all__ = [
    "get_metadata_tool",
    "mooncake_line",
    "plural",
    "prefill_line",
    "vllm_line",
    "wait_prefill",
    "wait_vllm",
]

_NAMED = 8
"""The missing ranks or failing engines a line names (then a count of the rest)."""


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 engine``, ``2 engines``: ``nouns`` when the plural is not ``noun`` + ``s``."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


async def prefill_line(client: BootstrapClient) -> tuple[str, bool, int] | None:
    """The prefill deployment's line (its ranks, the missing ones), whether it is complete, and how many
    ranks it holds; ``None`` when the namespace holds none (or the server predates the prefill face)."""
    try:
        listing = await client.prefill_status(timeout=0)  # asked once, as the listings: status never waits
    except UnexpectedReply:
        return None
    topology = listing["topology"]
    if topology is None:
        return None
    sizes = " x ".join(f"{axis} {topology[f'{axis}_size']}" for axis in ("dp", "cp", "tp", "pp"))
    registered, expected = int(listing["registered"]), int(listing["expected"])
    line = f"prefill: {registered} of {plural(expected, 'rank')} registered ({sizes})"
    if listing["missing_count"]:
        shown = ", ".join(listing["missing"][:_NAMED])
        more = listing["missing_count"] - min(len(listing["missing"]), _NAMED)
        line += f", missing: {shown}" + (f" and {more} more" if more > 0 else "")
    return line, bool(listing["complete"]), registered


async def mooncake_line(client: BootstrapClient) -> tuple[str, int] | None:
    """The namespace's Mooncake engines in one line, and how many keys it holds; ``None`` for none."""
    try:
        listing = await client.mooncake_engines(timeout=0)
    except UnexpectedReply:
        return None
    if not listing["keys"]:
        return None
    engines = listing["engines"]
    with_segment = sum(1 for engine in engines if engine["segment"])
    line = (
        f"mooncake: {plural(int(listing['engine_count']), 'engine')} ({with_segment} with a segment), "
        f"{plural(int(listing['keys']), 'key')}"
    )
    failing = [engine["name"] for engine in engines if engine.get("probe_failures")]
    if failing:
        line += f", failing probes: {', '.join(printable(name) for name in failing[:_NAMED])}"
    return line, int(listing["keys"])


async def vllm_line(client: BootstrapClient) -> tuple[str, int] | None:
    """The namespace's vLLM workers in one line (how many, on how many dp ranks, of which engines, those
    failing probes), and how many it holds; ``None`` for none. Their completeness is not known: a vLLM
    worker does not say its deployment's sizes, decode does (``client.wait_vllm_workers(tp_size=...)``)."""
    try:
        listing = await client.vllm_status(timeout=0)
    except UnexpectedReply:
        return None
    count = int(listing["worker_count"])
    if not count:
        return None
    workers = listing["workers"]
    engines = list(dict.fromkeys(str(worker["engine_id"]) for worker in workers))
    line = f"vllm: {plural(count, 'worker')} on {plural(int(listing['dp_ranks']), 'dp rank')}"
    line += f" ({plural(len(engines), 'engine')}: {', '.join(printable(e) for e in engines[:_NAMED])})"
    failing = [
        f"dp{worker['dp_rank']}-tp{worker['tp_rank']}-pp{worker['pp_rank']}"
        for worker in workers
        if worker.get("probe_failures")
    ]
    if failing:
        line += f", failing probes: {', '.join(failing[:_NAMED])}"
    return line, count


async def wait_prefill(client: BootstrapClient, timeout: float | None) -> str:
    """Wait until the namespace's prefill deployment is complete (every rank its topology names, the first
    rank's topology awaited too); the line saying so. :class:`ToolError` (exit 1) naming the missing ranks
    when ``timeout`` runs out first."""
    try:
        info = await client.prefill_parallel_info(timeout=timeout)
    except RankNotRegistered as exc:
        after = "" if timeout is None else f" after {timeout:g}s"
        raise ToolError(f"the prefill deployment is not complete{after}: {exc.detail}", EXIT_ABSENT) from None
    sizes = {axis: info.get(name, 1) for axis, name in _PREFILL_SIZES.items()}
    count = 1
    for size in sizes.values():
        count *= int(size) if isinstance(size, int) else 1
    shown = " x ".join(f"{axis} {size}" for axis, size in sizes.items())
    return f"all {plural(count, 'prefill rank')} registered ({shown})"


async def wait_vllm(client: BootstrapClient, sizes: dict[str, int], timeout: float | None) -> str:
    """Wait until the namespace's vLLM deployment has the workers ``sizes`` (``tp_size``, ``pp_size``,
    ``dp_size``) make complete; the line saying so. :class:`ToolError` (exit 1) with the server's sentence
    (``dp_rank=0 lacks tp_rank=3 pp_rank=0.``) when ``timeout`` runs out first."""
    if "pp_size" in sizes and "tp_size" not in sizes:
        raise ToolError(
            "--pp-size needs --tp-size: a dp rank is whole with tp_size tp ranks of pp_size pp ranks"
        )
    try:
        workers = await client.wait_vllm_workers(**sizes, timeout=timeout)
    except RankNotRegistered as exc:
        # The server's sentence says it: "The vLLM deployment is not complete: dp_rank=0 lacks tp_rank=3 ...".
        after = "" if timeout is None else f" after {timeout:g}s"
        raise ToolError(f"gave up{after}: {exc.detail}", EXIT_ABSENT) from None
    engines = workers.engines.values()
    count = sum(len(pps) for engine in engines for pps in engine.worker_addr.values())
    shown = ", ".join(f"{name.removesuffix('_size')} {size}" for name, size in sizes.items())
    return f"{plural(count, 'vLLM worker')} registered on {plural(len(engines), 'dp rank')} ({shown})"


_PREFILL_SIZES = {"dp": "dp_size", "cp": "attn_cp_size", "tp": "attn_tp_size", "pp": "pp_size"}
"""Each axis of a prefill topology, and the field of the parallel info giving its size."""


async def get_metadata_tool(client: BootstrapClient, args: argparse.Namespace, out: TextIO) -> int:
    """``get --key KEY``: the key's value, its bytes as stored (a Mooncake engine's JSON), waiting ``--wait``
    seconds for it (and for a change after ``--after``)."""
    for given, name in ((args.rank is not None, "--rank"), (args.role != DEFAULT_ROLE, "--role")):
        if given:
            raise ToolError(f"{name} does not apply to a metadata --key")
    try:
        if args.wait > 0 or args.after:
            value, _ = await client.wait_metadata(args.key, after=args.after, timeout=args.wait)
        else:
            value = await client.get_metadata(args.key)
    except NotRegistered:
        newer = f" newer than version {args.after}" if args.after else ""
        waited = f" after {args.wait:g}s" if args.wait > 0 else ""
        raise ToolError(f"no value under key {printable(args.key)}{newer}{waited}", EXIT_ABSENT) from None
    out.flush()
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        buffer.write(value)  # byte for byte, as the engine stored it
        buffer.flush()
    else:  # a text stream only (a test's): the bytes decoded, the undecodable escaped
        out.write(value.decode(errors="backslashreplace"))
    return 0
