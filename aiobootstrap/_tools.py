"""The operator's tools: ``get``, ``register``, ``status`` and ``wait``.

Each is a thin layer over :class:`BootstrapClient`. ``_cli`` parses the
environment and hands over the token and the output streams; failures become
one line on the error stream and an exit status (see ``EXIT_*``), never a
traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import sys
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TextIO

from . import _protocol as protocol
from ._config import DEFAULT_HOST, DEFAULT_PORT
from ._logging import printable
from .exceptions import BadRequest, BootstrapError, RankNotRegistered, Unauthorized

if TYPE_CHECKING:
    # Imported when a tool runs: serving never pays for the client's imports.
    from ._client import BootstrapClient

    _Tool = Callable[[BootstrapClient, argparse.Namespace, TextIO, TextIO], Awaitable[int]]

__all__ = ["EXIT_ABSENT", "EXIT_SERVER", "EXIT_USAGE", "TOOLS", "add_tool_parsers", "run_tool"]

EXIT_ABSENT = 1
"""The rank(s) were not registered when the time ran out."""
EXIT_USAGE = 2
"""A bad argument or file, or a request the server refused (400, 401)."""
EXIT_SERVER = 3
"""The server could not be reached, or failed."""

_PROGRESS_EVERY = 1.0
"""Seconds between progress lines of a ``wait`` shown on a terminal."""


class ToolError(Exception):
    """A failure the tool explains in one line."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


# -- arguments ------------------------------------------------------------


def _rank(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a rank (a non-negative integer)")
    return int(text)


def _count(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def _url(text: str) -> str:
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL")
    return text


def _seconds(text: str) -> float:
    # The protocol's reader: what a tool takes is what wait= takes on the wire.
    seconds = protocol.parse_seconds(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative number of seconds")
    return seconds


def add_tool_parsers(parser: argparse.ArgumentParser) -> None:
    """Add the tools to ``parser`` as subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        type=_url,
        default=f"http://{DEFAULT_HOST}:{DEFAULT_PORT}",
        help="the server (default: %(default)s)",
    )
    common.add_argument(
        "--namespace",
        default=protocol.DEFAULT_NAMESPACE,
        help="the deployment's namespace on the server (default: %(default)s)",
    )
    common.add_argument(
        "--token",
        default=None,
        help="bearer token, if the server requires one (default: $AIOBOOTSTRAP_AUTH_TOKEN)",
    )
    common.add_argument(
        "--cacert",
        metavar="PATH",
        help="PEM file of the CA that signed an https server's certificate (default: the system's CAs)",
    )
    tools = parser.add_subparsers(dest="tool", metavar="COMMAND", required=True)

    get = tools.add_parser(
        "get",
        parents=[common],
        help="print a rank's info as JSON",
        description="Print a rank's info as JSON.",
    )
    get.add_argument("--rank", type=_rank, required=True)
    get.add_argument(
        "--wait",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for the rank to register (default: do not wait)",
    )

    register = tools.add_parser(
        "register", parents=[common], help="register a rank's info", description="Register a rank's info."
    )
    register.add_argument("--rank", type=_rank, required=True)
    register.add_argument("--session-id", required=True)
    register.add_argument(
        "--weights-file",
        required=True,
        metavar="FILE",
        help="a JSON object: the weights_info_dict ('-' reads standard input)",
    )
    register.add_argument(
        "--timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="keep trying this long while the server is unreachable (default: %(default)g)",
    )

    status = tools.add_parser(
        "status",
        parents=[common],
        help="list the registered ranks",
        description="List the registered ranks and, with a known world size, the missing ones.",
    )
    status.add_argument(
        "--world-size",
        type=_count,
        default=None,
        metavar="N",
        help="ranks 0 to N-1 are expected (default: the server's --world-size, if it has one)",
    )

    wait = tools.add_parser(
        "wait",
        parents=[common],
        help="exit 0 once every rank is registered",
        description="Wait until ranks 0 to N-1 are all registered, then exit 0 (for scripts and init "
        "containers). Exit 1 if the timeout runs out first.",
    )
    wait.add_argument("--world-size", type=_count, required=True, metavar="N")
    wait.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="give up after this long (default: wait for ever)",
    )


# -- running --------------------------------------------------------------


def _tls(cacert: str | None) -> ssl.SSLContext | bool:
    if cacert is None:
        return True
    try:
        return ssl.create_default_context(cafile=cacert)
    except OSError as exc:  # ssl.SSLError included
        raise ToolError(f"cannot load the CA file {cacert}: {exc.strerror or exc}") from None


async def run_tool(args: argparse.Namespace, *, token: str | None, out: TextIO, err: TextIO) -> int:
    """Run the tool ``args.tool``; its exit status."""
    from ._client import BootstrapClient

    tool = _TOOLS[args.tool]
    try:
        tls = _tls(args.cacert)
        async with BootstrapClient(
            args.url, token=token or None, namespace=args.namespace, ssl=tls
        ) as client:
            return await tool(client, args, out, err)
    except ToolError as exc:
        message, status = str(exc), exc.status
    except RankNotRegistered as exc:
        message, status = exc.detail, EXIT_ABSENT
    except (BadRequest, Unauthorized) as exc:
        message, status = exc.detail, EXIT_USAGE
    except BootstrapError as exc:
        message, status = exc.detail, EXIT_SERVER
    print(f"aiobootstrap {args.tool}: {message}", file=err)
    return status


async def _get(client: BootstrapClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    info = await client.get(args.rank, timeout=args.wait)
    shown = {
        "rank": info.rank,
        "session_id": info.session_id,
        "weights_info_dict": info.weights_info_dict,
        "version": info.version,
    }
    print(json.dumps(shown, indent=2), file=out)
    return 0


async def _register(client: BootstrapClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    weights = _read_weights(args.weights_file)
    await client.register(
        args.rank, session_id=args.session_id, weights_info_dict=weights, timeout=args.timeout
    )
    print(f"registered rank {args.rank} in namespace {client.namespace}", file=out)
    return 0


def _read_weights(name: str) -> dict[str, Any]:
    try:
        if name == "-":
            text = sys.stdin.read()
        else:
            with open(name, encoding="utf-8") as file:
                text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ToolError(f"cannot read the weights file {name}: {reason}") from None
    try:
        weights = protocol.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ToolError(f"the weights file {name} is not valid JSON: {exc}") from None
    if not isinstance(weights, dict):
        raise ToolError(f"the weights file {name} must hold a JSON object, not {type(weights).__name__}")
    return weights


async def _status(client: BootstrapClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    listing = await client.list_ranks()
    world_size = args.world_size if args.world_size is not None else listing.world_size
    heading = f"namespace {client.namespace}: {len(listing.ranks)} registered"
    if world_size is not None:
        heading += f" of world size {world_size}"
    heading += f", version {listing.version}"
    rows = [("RANK", "SESSION ID", "VERSION", "AGE")]
    rows += [
        (str(rank.rank), printable(rank.session_id or ""), str(rank.version), format_age(rank.age))
        for rank in listing.ranks
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    print(heading, file=out)
    for *cells, age in rows:
        print(
            "  ".join([*(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)), age]),
            file=out,
        )
    if world_size is not None:
        registered = {rank.rank for rank in listing.ranks}
        missing = [rank for rank in range(world_size) if rank not in registered]
        print(f"missing: {protocol.format_ranks(missing) or 'none'}", file=out)
    return 0


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
    world_size: int = args.world_size
    progress = asyncio.create_task(_show_progress(client, world_size, err)) if err.isatty() else None
    try:
        await client.get_many(range(world_size), timeout=args.timeout)
    except RankNotRegistered as exc:
        missing = protocol.format_ranks(exc.ranks)
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
    print(f"all {world_size} ranks registered in namespace {client.namespace}", file=out)
    return 0


async def _show_progress(client: BootstrapClient, world_size: int, err: TextIO) -> None:
    """Rewrite one line with the count registered so far, until cancelled."""
    while True:
        try:
            listing = await client.list_ranks()
        except BootstrapError:
            shown = "server not answering yet"
        else:
            count = sum(1 for rank in listing.ranks if rank.rank < world_size)
            shown = f"{count}/{world_size} ranks registered"
        print(f"\r{shown:<40}", end="", file=err, flush=True)
        await asyncio.sleep(_PROGRESS_EVERY)


_TOOLS: dict[str, _Tool] = {"get": _get, "register": _register, "status": _status, "wait": _wait}
TOOLS = tuple(_TOOLS)
