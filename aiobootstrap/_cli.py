"""The command line: argv -> config -> run. The only module that reads the
environment, installs signal handlers or prints for the user."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from . import __version__
from ._config import DEFAULT_HOST, DEFAULT_PORT, ServerConfig
from ._server import AddressInUse, BootstrapServer
from .exceptions import BootstrapError

__all__ = ["main"]

log = logging.getLogger("aiobootstrap")

_LOG_LEVELS = ("debug", "info", "warning", "error")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage block: the CLI's failures fit on a line.
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m aiobootstrap",
        description="Serve transfer-engine info to the ranks of a deployment; getters may wait.",
    )
    parser.add_argument("--version", action="version", version=f"aiobootstrap {__version__}")
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (default: %(default)s)")
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="port to listen on; 0 picks a free one (default: %(default)s)",
    )
    parser.add_argument(
        "--world-size",
        type=int,
        default=None,
        metavar="W",
        help="number of ranks; others are refused (default: any)",
    )
    parser.add_argument(
        "--max-wait",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="longest wait one request may ask for; longer asks are clamped (default: %(default)g)",
    )
    parser.add_argument(
        "--max-body-size",
        type=int,
        default=64 * 1024 * 1024,
        metavar="BYTES",
        help="largest request body accepted (default: %(default)d, 64 MiB)",
    )
    parser.add_argument(
        "--max-waiters",
        type=int,
        default=None,
        metavar="N",
        help="most waits parked at once; more get 503 with Retry-After (default: no limit)",
    )
    parser.add_argument("--log-level", choices=_LOG_LEVELS, default="info", help="(default: %(default)s)")
    return parser


def _config(args: argparse.Namespace) -> ServerConfig:
    return ServerConfig(
        host=args.host,
        port=args.port,
        world_size=args.world_size,
        max_wait=args.max_wait,
        max_body_size=args.max_body_size,
        max_waiters=args.max_waiters,
    )


def raise_open_file_limit() -> None:
    """Raise the soft RLIMIT_NOFILE to the hard one: each parked wait holds a socket."""
    try:
        import resource
    except ImportError:  # not on this platform: nothing to raise
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open file limit from %d to %d: %s", soft, target, exc)
    else:
        log.debug("raised the open file limit from %d to %d", soft, target)


async def serve(config: ServerConfig) -> int:
    """Serve until SIGTERM or SIGINT; the exit status."""
    raise_open_file_limit()
    server = BootstrapServer(config)
    try:
        await server.start()
    except AddressInUse as exc:
        print(exc.detail, file=sys.stderr)
        return 2
    except BootstrapError as exc:
        print(exc.detail, file=sys.stderr)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"aiobootstrap listening on {server.url}", flush=True)
    try:
        await stop.wait()
        log.info("stopping: answering parked waits and closing")
    finally:
        await server.close()
    return 0


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (the ``fast`` extra): faster at writing large replies, see docs/benchmarks.md."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = _config(args)
    except ValueError as exc:
        print(f"python -m aiobootstrap: {exc}", file=sys.stderr)
        return 2
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            return runner.run(serve(config))
    except KeyboardInterrupt:  # interrupted before the signal handlers were in place
        return 130
