"""The ``watch`` tool: print a namespace's changes as they happen, until interrupted.

One line per change (``version 7 put transfer_engine_info rank 3 role
target``, ``version 8 delete encoder_urls http://10.0.0.9:8000``), or with
``--json`` the change as the wire writes it, one object per line. It follows
``client.watch()``: across reconnects, replicas and restarts, a ``410``
answered by the listing's difference.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from .. import wire as protocol
from .._logging import printable
from .._names import ENCODER_URLS, RANK_KINDS

if TYPE_CHECKING:
    from ..client.client import BootstrapClient
    from ..wire import WatchedChange

__all__ = ["add_watch_parser", "describe", "watch_tool"]


def add_watch_parser(
    tools: Any,
    common: argparse.ArgumentParser,
    *,
    ranks: Callable[[str], str],
    version: Callable[[str], int],
) -> argparse.ArgumentParser:
    """Add ``watch`` to the tools' subcommands (``ranks``, ``version``: the tools' readers of them)."""
    watch = tools.add_parser(
        "watch",
        parents=[common],
        help="print every change as it happens, until interrupted",
        description="Print the namespace's changes (registrations, unregisters, encoder URLs added and "
        "removed) as they happen, one line each, until interrupted (Ctrl-C: exit status 130).",
    )
    watch.add_argument(
        "--after",
        type=version,
        default=0,
        metavar="VERSION",
        help="the changes after this version (default: %(default)s, every change the server keeps)",
    )
    watch.add_argument("--kind", choices=(*RANK_KINDS, ENCODER_URLS), help="only changes of this kind")
    watch.add_argument("--role", help="only changes of this role")
    watch.add_argument(
        "--ranks", type=ranks, metavar="SET", help="only changes of these ranks, such as 0-7,12"
    )
    watch.add_argument("--json", action="store_true", help="one JSON object per change")
    return watch  # type: ignore[no-any-return]


def describe(change: WatchedChange) -> str:
    """A change in one line for people."""
    if change.url is not None:
        return f"version {change.version} {change.op} {change.kind} {printable(change.url)}"
    return (
        f"version {change.version} {change.op} {change.kind} rank {change.rank} "
        f"role {printable(change.role or '')}"
    )


async def watch_tool(client: BootstrapClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print every change after ``--after`` for ever; the client's errors end it (``tools`` maps them)."""
    ranks = None if args.ranks is None else protocol.parse_ranks(args.ranks)
    async for change in client.watch(args.after, kind=args.kind, role=args.role, ranks=ranks):
        line = json.dumps(change.as_json()) if args.json else describe(change)
        print(line, file=out, flush=True)
    return 0
