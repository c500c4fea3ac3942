"""The operator's tools: ``get``, ``status`` and ``wait`` here; ``register`` and ``watch`` in rooms of
their own (``register_tool``, ``watch_tool``).

``get``, ``status`` and ``wait`` cover every kind of record (``--kind``:
transfer-engine info, parallelism configs, and for ``get`` and ``status`` the
encoder URL list) and role (``--role``).

Each is a thin layer over :class:`BootstrapClient`. Their arguments are
``tool_parser``'s; ``main`` reads the environment and hands over the token and
the output streams. Failures become one line on the error stream and an exit
status (see ``EXIT_*``), never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TextIO

from .._logging import printable
from .._names import DEFAULT_ROLE, ENCODER_URLS, PARALLELISM_CONFIG, RANK_KINDS, TRANSFER_ENGINE_INFO
from ..exceptions import (
    BadRequest,
    BootstrapError,
    Forbidden,
    RankNotRegistered,
    Unauthorized,
    UnexpectedReply,
)
from ..wire.params import format_ranks
from ..wire.results import missing_in_world
from .listening import addressed, listener_lines, namespaces_tool, read_listening, shown_namespace
from .register_tool import register_tool
from .tool_errors import EXIT_ABSENT, EXIT_SERVER, EXIT_USAGE, ToolError
from .tool_parser import KINDS
from .watch_tool import describe, watch_tool

if TYPE_CHECKING:
    # Imported when a tool runs: serving never pays for the client's imports.
    from .._ranks import RankSet
    from ..client.client import BootstrapClient
    from ..wire.results import RankListing

    _Tool = Callable[[BootstrapClient, argparse.Namespace, TextIO, TextIO], Awaitable[int]]

__all__ = ["EXIT_ABSENT", "EXIT_SERVER", "EXIT_USAGE", "TOOLS", "format_age", "run_tool"]

_PROGRESS_EVERY = 1.0
"""Seconds between progress lines of a ``wait`` shown on a terminal."""
_NAMED = 8
"""The missing ranks a ``wait`` progress line names (then a count of the rest)."""


def _tls(cacert: str | None) -> ssl.SSLContext | bool:
    if cacert is None:
        return True
    try:
        return ssl.create_default_context(cafile=cacert)
    except OSError as exc:  # ssl.SSLError included
        raise ToolError(f"cannot load the CA file {cacert}: {exc.strerror or exc}") from None


async def run_tool(args: argparse.Namespace, *, token: str | None, out: TextIO, err: TextIO) -> int:
    """Run the tool ``args.tool``; its exit status."""
    from ..client.client import BootstrapClient

    tool = _TOOLS[args.tool]
    try:
        tls = _tls(args.cacert)
        args.bearer, args.tls = token or None, tls  # for a read of its own (status's listeners)
        async with BootstrapClient(
            args.url, token=token or None, namespace=args.namespace, ssl=tls
        ) as client:
            return await tool(client, args, out, err)
    except ToolError as exc:
        message, status = str(exc), exc.status
    except RankNotRegistered as exc:
        message, status = exc.detail, EXIT_ABSENT
        if getattr(args, "after", 0):
            # The rank may well be registered, at a version the caller already has.
            message = f"{message} newer than version {args.after}"
    except (BadRequest, Unauthorized, Forbidden) as exc:
        message, status = exc.detail, EXIT_USAGE
    except BootstrapError as exc:
        message, status = exc.detail, EXIT_SERVER
    print(f"aiobootstrap {args.tool}: {message}", file=err)
    return status


async def _get(client: BootstrapClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.kind == ENCODER_URLS:
        return await _get_encoder_urls(client, args, out)
    if args.rank is None:
        raise ToolError(f"--rank is required for --kind {args.kind}")
    shown: dict[str, Any] = {"rank": args.rank}
    if args.role != DEFAULT_ROLE:
        shown["role"] = args.role
    if args.kind == PARALLELISM_CONFIG:
        config = await client.get_parallelism_config(
            args.rank, timeout=args.wait, after=args.after, role=args.role
        )
        shown.update(parallelism_config=config.config, version=config.version)
    else:
        # Whole: an operator sees every field the rank sent, classic info included.
        info = await client.get(args.rank, timeout=args.wait, after=args.after, role=args.role, whole=True)
        shown.update(info.fields, version=info.version)
    print(json.dumps(shown, indent=2), file=out)
    return 0


async def _get_encoder_urls(client: BootstrapClient, args: argparse.Namespace, out: TextIO) -> int:
    if args.rank is not None:
        raise ToolError(f"--rank does not apply to --kind {ENCODER_URLS}")
    if args.role != DEFAULT_ROLE:
        raise ToolError(f"--role does not apply to --kind {ENCODER_URLS}")
    urls = await client.wait_encoder_urls(args.after, timeout=args.wait)
    if args.wait > 0 and urls.version == args.after:
        raise ToolError(
            f"the encoder URL list did not change after version {args.after} in {args.wait:g}s "
            f"(it is at version {urls.version})",
            EXIT_ABSENT,
        )
    print(json.dumps({"encoder_urls": urls.urls, "version": urls.version}, indent=2), file=out)
    return 0


async def _status(client: BootstrapClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Exit 0 when every rank of a known world size is in for each kind and role shown, else 1."""
    if args.watch:
        return await _status_watch(client, args, out)
    listening = await read_listening(args.url, args.bearer, args.tls)
    if args.namespaces:
        return await namespaces_tool(client, out, listening)
    kinds = args.kind or list(KINDS)
    roles = args.role or [DEFAULT_ROLE]
    sections: list[str] = []
    version = waiters = held = 0
    complete, warned = True, False
    for kind in (kind for kind in KINDS if kind in kinds and kind in RANK_KINDS):
        for role in dict.fromkeys(roles):
            listing = await client.list_ranks(kind=kind, role=role)
            version, waiters, held = max(version, listing.version), listing.waiters, held + len(listing.ranks)
            if not listing.ranks and args.kind is None and kind != TRANSFER_ENGINE_INFO:
                continue  # a kind the deployment does not use: shown when --kind asks for it
            server_size, asked = listing.world_size, args.world_size
            if not warned and None not in (server_size, asked) and server_size != asked:
                warned = True
                print(
                    f"warning: --world-size {asked} differs from the server's world size {server_size}",
                    file=err,
                )
            lines, missing = _ranks_section(listing, args.world_size)
            sections += lines
            complete = complete and not missing
    if ENCODER_URLS in kinds:
        urls = await client.wait_encoder_urls(timeout=0)
        version, held = max(version, urls.version), held + len(urls.urls)
        sections.append(f"{ENCODER_URLS}: {len(urls.urls)} listed, version {urls.version}")
        sections += [f"  {printable(url)}" for url in urls.urls]
    prefill = await _prefill_section(client)
    if prefill is not None:
        line, ready, registered = prefill
        sections.append(line)
        complete, held = complete and ready, held + registered
    mooncake = await _mooncake_section(client)
    if mooncake is not None:
        sections.append(mooncake[0])
        held += mooncake[1]
    namespace = shown_namespace(client, listening)  # on a listener's port, its namespace
    print(f"namespace {namespace}, version {version}, {waiters} waiting", file=out)
    for line in [*listener_lines(namespace, listening), *sections]:
        print(line, file=out)
    if not held:
        await _hint_namespaces(client, namespace, err)
    return 0 if complete else EXIT_ABSENT


async def _prefill_section(client: BootstrapClient) -> tuple[str, bool, int] | None:
    """The prefill deployment's line (its ranks, the missing ones), whether it is complete, and how many
    ranks it holds; ``None`` when the namespace holds none (or the server predates the prefill face)."""
    try:
        listing = await client.prefill_status()
    except UnexpectedReply:
        return None
    topology = listing["topology"]
    if topology is None:
        return None
    sizes = " x ".join(f"{axis} {topology[f'{axis}_size']}" for axis in ("dp", "cp", "tp", "pp"))
    line = f"prefill: {listing['registered']} of {listing['expected']} ranks registered ({sizes})"
    if listing["missing_count"]:
        shown = ", ".join(listing["missing"][:_NAMED])
        more = listing["missing_count"] - min(len(listing["missing"]), _NAMED)
        line += f", missing: {shown}" + (f" and {more} more" if more > 0 else "")
    return line, bool(listing["complete"]), int(listing["registered"])


async def _mooncake_section(client: BootstrapClient) -> tuple[str, int] | None:
    """The namespace's Mooncake engines in one line, and how many keys it holds; ``None`` for none."""
    try:
        listing = await client.mooncake_engines()
    except UnexpectedReply:
        return None
    if not listing["keys"]:
        return None
    engines = listing["engines"]
    with_segment = sum(1 for engine in engines if engine["segment"])
    line = (
        f"mooncake: {listing['engine_count']} engines ({with_segment} with a segment), {listing['keys']} keys"
    )
    failing = [engine["name"] for engine in engines if engine.get("probe_failures")]
    if failing:
        line += f", failing probes: {', '.join(printable(name) for name in failing[:_NAMED])}"
    return line, int(listing["keys"])


async def _status_watch(client: BootstrapClient, args: argparse.Namespace, out: TextIO) -> int:
    """``status --watch``: a line per kind and role, followed through ``/watch`` until interrupted.

    On a terminal the lines are redrawn in place at each change; elsewhere (a pipe, a log) they are
    printed once, then each change as a line, as ``watch`` prints it.
    """
    lines, version = await _summary(client, args)
    terminal = out.isatty()
    print("\n".join(lines), file=out, flush=True)
    async for change in client.watch(version):
        if not terminal:
            print(describe(change), file=out, flush=True)
            continue
        drawn = len(lines)
        lines, _ = await _summary(client, args)
        # Up to the first line drawn, clear to the end, draw again.
        out.write(f"\x1b[{drawn}F\x1b[J" + "\n".join(lines) + "\n")
        out.flush()
    return 0


async def _summary(client: BootstrapClient, args: argparse.Namespace) -> tuple[list[str], int]:
    """One line per per-rank kind and role asked: how many registered and, with a world size, who is missing."""
    lines, version = [], 0
    for kind in (kind for kind in RANK_KINDS if args.kind is None or kind in args.kind):
        for role in dict.fromkeys(args.role or [DEFAULT_ROLE]):
            listing = await client.list_ranks(kind=kind, role=role)
            version = max(version, listing.version)
            if not listing.ranks and args.kind is None and kind != TRANSFER_ENGINE_INFO:
                continue  # as plain status: a kind the deployment does not use is shown when --kind asks
            line = f"{kind}, role {printable(role)}: {len(listing.ranks)} registered"
            world_size = args.world_size if args.world_size is not None else listing.world_size
            missing = _missing(listing, world_size)
            if missing is not None:
                more = len(missing.ranges) - _NAMED
                named = missing.format(_NAMED) + (f" and {more} more ranges" if more > 0 else "")
                line += f" of {world_size}, missing: {named if missing else 'none'}"
            lines.append(line)
    return lines, version


async def _hint_namespaces(client: BootstrapClient, namespace: str, err: TextIO) -> None:
    """An empty namespace: say so, name the server's namespaces, and the nearest to the one asked."""
    try:
        names = [each.name for each in await client.list_namespaces() if each.name != namespace]
    except BootstrapError:
        return  # a token that may not list them: the empty listing says enough
    near = difflib.get_close_matches(namespace, names, n=1)
    hint = f" (did you mean {printable(near[0])}?)" if near else ""
    shown = ", ".join(printable(name) for name in names) or "none"
    print(f"namespace {namespace} holds nothing; the server's namespaces: {shown}{hint}", file=err)


def _ranks_section(listing: RankListing, asked_world_size: int | None) -> tuple[list[str], RankSet | None]:
    """One kind and role: a heading, a table of its ranks, and the missing ones (with the missing set)."""
    world_size = asked_world_size if asked_world_size is not None else listing.world_size
    heading = f"{listing.kind}, role {printable(listing.role)}: {len(listing.ranks)} registered"
    if world_size is not None:
        heading += f" of world size {world_size}"
    lines = [heading]
    if listing.ranks:
        tagged = any(rank.backend is not None for rank in listing.ranks)
        header = ["RANK"]
        if listing.kind == TRANSFER_ENGINE_INFO:
            header += ["SESSION ID", "BACKEND"] if tagged else ["SESSION ID"]
        rows = [[*header, "VERSION", "AGE"]]
        for rank in listing.ranks:
            row = [str(rank.rank)]
            if listing.kind == TRANSFER_ENGINE_INFO:
                row.append(printable(rank.session_id or "-"))
                if tagged:
                    row.append(printable(rank.backend or "-"))
            rows.append([*row, str(rank.version), format_age(rank.age)])
        widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
        for *cells, age in rows:
            padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=True)]
            lines.append("  " + "  ".join([*padded, age]))
    missing = _missing(listing, world_size)
    if missing is not None:
        # Who waits for which missing rank, as ranges: "(2 waiting on 3; 1 waiting on 0-2,7)".
        waited = [(ranks.without(ranks.without(missing)), waits) for ranks, waits in listing.waiters_by_rank]
        shown = "; ".join(f"{waits} waiting on {ranks}" for ranks, waits in waited if ranks)
        lines.append(f"  missing: {missing or 'none'}" + (f" ({shown})" if shown else ""))
    return lines, missing


def _missing(listing: RankListing, world_size: int | None) -> RankSet | None:
    """The ranks of ``[0, world_size)`` the listing lacks; ``None`` without a world size."""
    if world_size is None:
        return None
    if listing.missing_ranks is not None and world_size == listing.world_size:
        return listing.missing_ranks
    return missing_in_world(world_size, (rank.rank for rank in listing.ranks))


def format_age(seconds: float) -> str:
    """``seconds`` for a human: ``4.2s``, ``3m05s``, ``2h07m``, ``3d04h``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


async def _wait(client: BootstrapClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    kind, role = args.kind, args.role
    world_size: int | None = args.world_size
    if world_size is None:  # the server's, as status reads it
        world_size = (await client.list_ranks(kind=kind, role=role)).world_size
        if world_size is None:
            raise ToolError("the server has no --world-size: give wait --world-size N")
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
    print(f"all {world_size} ranks registered{what} in namespace {await addressed(client, args)}", file=out)
    return 0


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
            missing = _missing(listing, world_size)
            if missing:
                first = missing.head(_NAMED)
                more = f" and {len(missing) - len(first)} more" if len(missing) > len(first) else ""
                shown += f", missing {','.join(map(str, first))}{more}"
        print(f"\r{shown:<60}", end="", file=err, flush=True)
        await asyncio.sleep(_PROGRESS_EVERY)


_TOOLS: dict[str, _Tool] = {
    "get": _get,
    "register": register_tool,
    "status": _status,
    "wait": _wait,
    "watch": watch_tool,
}
TOOLS = tuple(_TOOLS)
