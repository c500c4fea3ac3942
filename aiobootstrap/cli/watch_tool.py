"""The ``watch`` tool: print a namespace's changes as they happen, until interrupted.

One line per change (``version 7 put transfer_engine_info rank 3 role
target``, ``version 8 delete encoder_urls http://10.0.0.9:8000``, ``version 9
put metadata mooncake/ram/10.0.0.7:18000`` for a named record), or with
``--json`` the change as the wire writes it, one object per line. It follows
``client.watch()``: across reconnects, replicas and restarts, a ``410``
answered by the listing's difference.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from .._logging import printable
from ..wire.params import parse_ranks

if TYPE_CHECKING:
    from ..client.client import BootstrapClient
    from ..wire.watch import WatchedChange

__all__ = ["EXIT_INTERRUPTED", "add_watch_parser", "describe", "watch_tool"]

EXIT_INTERRUPTED = 128
"""Added to the signal's number for the exit status, as a shell reports a process a signal ended (Ctrl-C: 130)."""

_EXIT_GRACE = 1.0
"""Seconds the parked long-poll is given to unwind once interrupted; the tool exits after them regardless."""


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
    # Not a fixed list: the kinds are the served faces' (a face is a folder), so the server checks the
    # name and its 400 names the kinds it serves, which the tool prints as its one line.
    watch.add_argument(
        "--kind",
        metavar="KIND",
        help="only changes of this kind (transfer_engine_info, metadata, prefill_rank, ...)",
    )
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
    if change.key is not None:
        return f"version {change.version} {change.op} {change.kind} {printable(change.key)}"
    return (
        f"version {change.version} {change.op} {change.kind} rank {change.rank} "
        f"role {printable(change.role or '')}"
    )


async def watch_tool(client: BootstrapClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print every change after ``--after`` until SIGINT (status 130) or SIGTERM (143); the client's errors end it too.

    The signal is the tool's own, not asyncio's ``KeyboardInterrupt``: that
    cancels the whole task, and the exit then waits for the parked long-poll,
    its retries and its connection to unwind, which a loaded machine once
    stretched past 30 s. Here the wait for the next change is dropped, given
    :data:`_EXIT_GRACE` to unwind, and the tool returns.
    """
    ranks = None if args.ranks is None else parse_ranks(args.ranks)
    changes = client.watch(args.after, kind=args.kind, role=args.role, ranks=ranks)
    loop = asyncio.get_running_loop()
    stopping: asyncio.Future[int] = loop.create_future()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, _stop, stopping, signum)
    try:
        while True:
            following = asyncio.ensure_future(anext(changes))
            await asyncio.wait((following, stopping), return_when=asyncio.FIRST_COMPLETED)
            if not following.done():
                following.cancel()
                await asyncio.wait((following,), timeout=_EXIT_GRACE)
                return EXIT_INTERRUPTED + stopping.result()
            try:
                change = following.result()
            except StopAsyncIteration:
                return 0
            line = json.dumps(change.as_json()) if args.json else describe(change)
            print(line, file=out, flush=True)
    finally:
        stopping.cancel()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def _stop(stopping: asyncio.Future[int], signum: int) -> None:
    if not stopping.done():
        stopping.set_result(signum)
