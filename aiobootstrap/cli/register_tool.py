"""The ``register`` tool: publish one rank's record, once or held on a lease until interrupted.

``--kind`` and ``--role`` choose the record; ``--session-id``, ``--weights-file``,
``--info-file`` and ``--field KEY=JSON`` make it; ``--lease-ttl`` keeps it on a
lease until SIGINT or SIGTERM, then revokes the lease.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TextIO

from .. import _json
from .._logging import printable
from .._names import DEFAULT_ROLE, PARALLELISM_CONFIG, TRANSFER_ENGINE_INFO
from .listening import addressed
from .tool_errors import ToolError

if TYPE_CHECKING:
    from ..client.client import BootstrapClient
    from ..client.leases import ClientLease

__all__ = ["register_tool"]


async def register_tool(client: BootstrapClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    send = _registration(client, args)
    rank = _registered(args)
    if args.timeout and not await client.health():
        # It keeps trying for --timeout seconds (a server starting beside it comes up meanwhile): said at once,
        # so that the wait does not look like a hang, where get gives up after one refused try.
        print(
            f"no answer from {client.url} yet; trying for up to {args.timeout:g} s (--timeout)",
            file=err,
            flush=True,
        )
    if args.lease_ttl is not None:
        return await _register_on_lease(client, args, send, rank, out)
    await send(None)
    print(f"registered {rank} in namespace {await addressed(client, args)}", file=out)
    return 0


_Send = Callable[["ClientLease | None"], Awaitable[None]]


def _registration(client: BootstrapClient, args: argparse.Namespace) -> _Send:
    """The register call the options describe, given a lease or ``None``; a bad file is a ``ToolError``."""
    record = _read_object(args.info_file, "info file") if args.info_file is not None else {}
    record.update(args.field)
    if args.kind == PARALLELISM_CONFIG:
        if args.session_id is not None or args.weights_file is not None:
            raise ToolError(
                "--session-id and --weights-file are transfer_engine_info's: "
                "give a parallelism config with --info-file or --field"
            )
        return lambda lease: client.register_parallelism_config(
            args.rank, record, role=args.role, timeout=args.timeout, lease=lease
        )
    if args.session_id is not None:
        record["session_id"] = args.session_id
    if args.weights_file is not None:
        record["weights_info_dict"] = _read_object(args.weights_file, "weights file")
    weights = record.pop("weights_info_dict", {})
    if not isinstance(weights, dict):
        raise ToolError(f"weights_info_dict must be a JSON object, not {type(weights).__name__}")
    # The session id goes as given, among the fields: the server says what is wrong with it.
    return lambda lease: client.register(
        args.rank, weights_info_dict=weights, fields=record, role=args.role, timeout=args.timeout, lease=lease
    )


def _registered(args: argparse.Namespace) -> str:
    """What a register registered: ``rank 3``, or ``rank 3's parallelism_config (role draft)``."""
    what = f"rank {args.rank}" if args.kind == TRANSFER_ENGINE_INFO else f"rank {args.rank}'s {args.kind}"
    return what if args.role == DEFAULT_ROLE else f"{what} (role {printable(args.role)})"


async def _register_on_lease(
    client: BootstrapClient, args: argparse.Namespace, send: _Send, rank: str, out: TextIO
) -> int:
    """Register on a lease kept alive until SIGINT or SIGTERM, then revoke it (the record goes with it)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with client.lease(ttl=args.lease_ttl, timeout=args.timeout) as lease:
            await send(lease)
            print(
                f"registered {rank} in namespace {await addressed(client, args)} on lease {lease.id} "
                f"(ttl {args.lease_ttl:g} s); keeping it alive until interrupted",
                file=out,
                flush=True,
            )
            await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    print(f"revoked the lease: {rank} unregistered", file=out, flush=True)
    return 0


def _read_object(name: str, what: str) -> dict[str, Any]:
    """The JSON object in file ``name`` (``-``: standard input), the ``what`` (weights file...)."""
    try:
        if name == "-":
            text = sys.stdin.read()
        else:
            with open(name, encoding="utf-8") as file:
                text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ToolError(f"cannot read the {what} {name}: {reason}") from None
    try:
        value = _json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ToolError(f"the {what} {name} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ToolError(f"the {what} {name} must hold a JSON object, not {type(value).__name__}")
    return value
