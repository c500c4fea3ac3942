"""The ``wait`` tool: exit 0 once every rank of a world size registered a record of a kind and role, or
once a prefill deployment is complete (its topology says which ranks make it), or a vLLM deployment of
the sizes given (``--tp-size``...: its workers do not say them).

Without ``--world-size``, the server's world size for the kind is used; without either, a namespace that
holds a prefill deployment is waited for as ``--kind prefill_rank`` asks (see ``_what``). On a terminal a
progress line says how many ranks registered so far, redrawn each second.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, TextIO

from .._logging import printable
from .._names import DEFAULT_ROLE, PARALLELISM_CONFIG, TRANSFER_ENGINE_INFO
from ..exceptions import BootstrapError, RankNotRegistered
from ..wire.params import format_ranks
from ..wire.prefill import PREFILL_RANK
from ..wire.results import missing_in_world
from ..wire.vllm import VLLM_WORKER
from .face_tools import prefill_line, vllm_line, wait_prefill, wait_vllm
from .listening import addressed
from .tool_errors import EXIT_ABSENT, ToolError

if TYPE_CHECKING:
    from .._ranks import RankSet
    from ..client.client import BootstrapClient
    from ..wire.results import RankListing

__all__ = ["missing_ranks", "wait_tool"]

_PROGRESS_EVERY = 1.0
"""Seconds between progress lines of a ``wait`` shown on a terminal."""
_NAMED = 8
"""The missing ranks a progress line names (then a count of the rest)."""


async def wait_tool(client: BootstrapClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Wait for ranks 0 to N-1 of ``--kind`` (N: ``--world-size``, else the server's), or for a prefill
    deployment's ranks (``--kind prefill_rank``, or a namespace holding one where no N is known)."""
    role: str = args.role
    kind, world_size = await _what(client, args)
    if kind in (PREFILL_RANK, VLLM_WORKER):
        if kind == PREFILL_RANK:
            done = await wait_prefill(client, args.timeout)
        else:
            done = await wait_vllm(client, _vllm_sizes(args), args.timeout)
        print(f"{done} in namespace {await addressed(client, args)}", file=out)
        return 0
    progress = (
        asyncio.create_task(_show_progress(client, world_size, kind, role, err)) if err.isatty() else None
    )
    try:
        if kind == PARALLELISM_CONFIG:
            await client.get_parallelism_configs(range(world_size), timeout=args.timeout, role=role)
        else:
            await client.get_many(range(world_size), timeout=args.timeout, role=role)
    except RankNotRegistered as exc:
        missing = format_ranks(exc.ranks)
        raise ToolError(
            f"{len(exc.ranks)} of {world_size} ranks still missing after {args.timeout:g}s: {missing}",
            EXIT_ABSENT,
        ) from None
    finally:
        if progress is not None:
            progress.cancel()
            # wait(), unlike await, leaves the task's CancelledError inside the task.
            await asyncio.wait({progress})
            print(file=err)
    what = (
        "" if (kind, role) == (TRANSFER_ENGINE_INFO, DEFAULT_ROLE) else f" {kind} of role {printable(role)}"
    )
    every = "rank 0 registered" if world_size == 1 else f"all {world_size} ranks registered"
    print(f"{every}{what} in namespace {await addressed(client, args)}", file=out)
    return 0


async def _what(client: BootstrapClient, args: argparse.Namespace) -> tuple[str, int]:
    """What ``wait`` waits for: a kind and the world size of its ranks; for a deployment whose topology
    says its ranks (prefill), or whose sizes are given (vLLM: ``--tp-size``...), the kind and ``0``.

    The rule: ``--kind`` names it, a vLLM size implies ``vllm_worker``; else the ranks of
    transfer-engine info, of ``--world-size`` or the server's; without either, the namespace's prefill
    deployment. A vLLM deployment cannot be waited for without its sizes: its workers do not say them."""
    sizes = _vllm_sizes(args)
    kind: str = args.kind or (VLLM_WORKER if sizes else TRANSFER_ENGINE_INFO)
    deployment = kind in (PREFILL_RANK, VLLM_WORKER)
    if deployment and (args.world_size is not None or args.role != DEFAULT_ROLE):
        raise ToolError(f"--world-size and --role do not apply to --kind {kind}: {_SAYS[kind]}")
    if sizes and kind != VLLM_WORKER:
        raise ToolError(f"--tp-size, --pp-size and --dp-size are a vLLM deployment's (--kind {VLLM_WORKER})")
    if kind == VLLM_WORKER and not sizes:
        raise ToolError(f"--kind {VLLM_WORKER} needs the deployment's sizes: give --tp-size N (--dp-size...)")
    if deployment:
        return kind, 0
    world_size: int | None = args.world_size
    if world_size is None:  # the server's, as status reads it
        world_size = (await client.list_ranks(kind=kind, role=args.role)).world_size
    if world_size is None and args.kind is None:
        if await prefill_line(client) is not None:
            return PREFILL_RANK, 0  # no N, but a topology that says which ranks make the deployment
        if await vllm_line(client) is not None:
            raise ToolError(
                "the namespace holds vLLM workers, which do not say their deployment's sizes: "
                "give wait --tp-size N (and --dp-size, --pp-size as deployed)"
            )
    if world_size is None:
        raise ToolError(
            "the server has no --world-size: give wait --world-size N "
            f"(or --kind {PREFILL_RANK} for a prefill deployment, whose topology says its ranks)"
        )
    return kind, world_size


_SAYS = {PREFILL_RANK: "its topology says which ranks", VLLM_WORKER: "--tp-size, --dp-size, --pp-size say"}


def _vllm_sizes(args: argparse.Namespace) -> dict[str, int]:
    """The vLLM sizes given (``tp_size``, ``pp_size``, ``dp_size``), as ``wait_vllm_workers`` takes them."""
    given = {"tp_size": args.tp_size, "pp_size": args.pp_size, "dp_size": args.dp_size}
    return {name: size for name, size in given.items() if size is not None}


async def _show_progress(client: BootstrapClient, world_size: int, kind: str, role: str, err: TextIO) -> None:
    """Rewrite one line with the count registered so far, until cancelled."""
    while True:
        try:
            listing = await client.list_ranks(kind=kind, role=role)
        except BootstrapError:
            shown = "server not answering yet"
        else:
            count = sum(1 for rank in listing.ranks if rank.rank < world_size)
            shown = f"{count}/{world_size} ranks registered"
            missing = missing_ranks(listing, world_size)
            if missing:
                first = missing.head(_NAMED)
                more = f" and {len(missing) - len(first)} more" if len(missing) > len(first) else ""
                shown += f", missing {','.join(map(str, first))}{more}"
        print(f"\r{shown:<60}", end="", file=err, flush=True)
        await asyncio.sleep(_PROGRESS_EVERY)


def missing_ranks(listing: RankListing, world_size: int | None) -> RankSet | None:
    """The ranks of ``[0, world_size)`` the listing lacks; ``None`` without a world size."""
    if world_size is None:
        return None
    if listing.missing_ranks is not None and world_size == listing.world_size:
        return listing.missing_ranks
    return missing_in_world(world_size, (rank.rank for rank in listing.ranks))
