"""The operator's tools: ``get``, ``status`` and ``wait`` here; ``register`` and ``watch`` in rooms of
their own (``register_tool``, ``watch_tool``), and what they do with the faces' own records in
``face_tools``.

``get``, ``status`` and ``wait`` cover every kind of record (``--kind``:
transfer-engine info, parallelism configs, and for ``get`` and ``status`` the
encoder URL list) and role (``--role``); ``get --key`` a metadata key's value,
``status`` a prefill deployment, Mooncake engines and vLLM workers in a line
each, ``wait`` a prefill deployment.

Each is a thin layer over :class:`BootstrapClient`. Their arguments are
``tool_parser``'s; ``main`` reads the environment and hands over the token and
the output streams. Failures become one line on the error stream and an exit
status (see ``EXIT_*``), never a traceback.
"""

from __future__ import annotations

import argparse
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
)
from ..wire.metadata import METADATA
from .face_tools import get_metadata_tool, mooncake_line, prefill_line, vllm_line
from .listening import listener_lines, namespaces_tool, read_listening, shown_namespace
from .register_tool import register_tool
from .tool_errors import EXIT_ABSENT, EXIT_SERVER, EXIT_USAGE, ToolError
from .tool_parser import KINDS, TOKEN_ENV
from .wait_tool import missing_ranks, wait_tool
from .watch_tool import describe, watch_tool

if TYPE_CHECKING:
    # Imported when a tool runs: serving never pays for the client's imports.
    from .._ranks import RankSet
    from ..client.client import BootstrapClient
    from ..wire.results import RankListing

    _Tool = Callable[[BootstrapClient, argparse.Namespace, TextIO, TextIO], Awaitable[int]]

__all__ = ["EXIT_ABSENT", "EXIT_SERVER", "EXIT_USAGE", "TOOLS", "format_age", "run_tool"]

_NAMED = 8
"""The missing ranks a ``status --watch`` line names (then a count of the rest)."""


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
    except Unauthorized as exc:
        # The server's sentence, then the tool's remedy: where a token is given, or that it was refused.
        told = f"give one with --token or {TOKEN_ENV}" if not token else f"the --token or {TOKEN_ENV} given"
        message, status = f"{exc.detail} ({told})", EXIT_USAGE
    except (BadRequest, Forbidden) as exc:
        message, status = exc.detail, EXIT_USAGE
    except BootstrapError as exc:
        message, status = exc.detail, EXIT_SERVER
    print(f"aiobootstrap {args.tool}: {message}", file=err)
    return status


async def _get(client: BootstrapClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    args.kind = args.kind or (METADATA if args.key is not None else TRANSFER_ENGINE_INFO)
    if args.kind == METADATA:
        if args.key is None:
            raise ToolError(f"--key is required for --kind {METADATA}")
        return await get_metadata_tool(client, args, out)
    if args.key is not None:
        raise ToolError(f"--key does not apply to --kind {args.kind}")
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
    faces: list[str] = []  # the faces' own lines: a prefill deployment, Mooncake engines, vLLM workers
    prefill = await prefill_line(client)
    if prefill is not None:
        line, ready, registered = prefill
        faces.append(line)
        complete, held = complete and ready, held + registered
    for each in (await mooncake_line(client), await vllm_line(client)):
        if each is not None:
            faces.append(each[0])
            held += each[1]
    for kind in (kind for kind in KINDS if kind in kinds and kind in RANK_KINDS):
        for role in dict.fromkeys(roles):
            listing = await client.list_ranks(kind=kind, role=role)
            version, waiters, held = max(version, listing.version), listing.waiters, held + len(listing.ranks)
            if args.kind is None and not _used(listing, args.world_size, bool(faces)):
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
        if urls.urls or args.kind is not None or not faces:  # an empty list is news in no face's namespace
            sections.append(f"{ENCODER_URLS}: {len(urls.urls)} listed, version {urls.version}")
            sections += [f"  {printable(url)}" for url in urls.urls]
    sections += faces
    namespace = shown_namespace(client, listening)  # on a listener's port, its namespace
    print(f"namespace {namespace}, version {version}, {waiters} waiting", file=out)
    for line in [*listener_lines(namespace, listening), *sections]:
        print(line, file=out)
    if not held:
        await _hint_namespaces(client, namespace, err)
    return 0 if complete else EXIT_ABSENT


def _used(listing: RankListing, asked_world_size: int | None, other_faces: bool) -> bool:
    """Whether ``status`` shows a kind and role it was not asked for by ``--kind``: it holds a rank or a
    wait, or it is transfer-engine info of a known world size (its missing ranks are the news), or of a
    namespace holding nothing of another face. Not an empty heading in a namespace of another face (a
    prefill, Mooncake or vLLM one), as the page draws none."""
    world_size = asked_world_size if asked_world_size is not None else listing.world_size
    return bool(listing.ranks or listing.waiters_by_rank) or (
        listing.kind == TRANSFER_ENGINE_INFO and (world_size is not None or not other_faces)
    )


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
                # As plain status, but engine info's line kept: a line to redraw at the first change.
                continue
            line = f"{kind}, role {printable(role)}: {len(listing.ranks)} registered"
            world_size = args.world_size if args.world_size is not None else listing.world_size
            missing = missing_ranks(listing, world_size)
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
    missing = missing_ranks(listing, world_size)
    if missing is not None:
        # Who waits for which missing rank, as ranges: "(2 waiting on 3; 1 waiting on 0-2,7)".
        waited = [(ranks.without(ranks.without(missing)), waits) for ranks, waits in listing.waiters_by_rank]
        shown = "; ".join(f"{waits} waiting on {ranks}" for ranks, waits in waited if ranks)
        lines.append(f"  missing: {missing or 'none'}" + (f" ({shown})" if shown else ""))
    return lines, missing


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


_TOOLS: dict[str, _Tool] = {
    "get": _get,
    "register": register_tool,
    "status": _status,
    "wait": wait_tool,
    "watch": watch_tool,
}
TOOLS = tuple(_TOOLS)
