"""The command line: argv -> config -> run. The only module that reads the
environment, installs signal handlers or prints for the user.

It binds the port before importing the server: a taken port, the commonest
start-up failure, is then reported without waiting for aiohttp to import.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from .._logging import LOG_FORMATS, setup_logging
from .._version import __version__
from ..exceptions import BootstrapError
from ..server import open_files as _open_files
from ..server.bind import AddressInUse, bind_sockets, explain_address_in_use
from ..server.config import DEFAULT_MAX_WAITERS, DEFAULT_STORE, ServerConfig
from .gc import tune_collector
from .tools import TOOLS, add_tool_parsers, run_tool

__all__ = ["loop_factory", "main"]

log = logging.getLogger("aiobootstrap")

_LOG_LEVELS = ("debug", "info", "warning", "error")

TOKEN_ENV = "AIOBOOTSTRAP_AUTH_TOKEN"
STORE_ENV = "AIOBOOTSTRAP_STORE"


_DEFAULTS = ServerConfig()
"""Every option's default is the config's: ``--help`` cannot say otherwise."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage block: the CLI's failures fit on a line.
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m aiobootstrap",
        description="Serve transfer-engine info to the ranks of a deployment; getters may wait.",
        epilog=f"Commands: serve (the default; takes the options above), {', '.join(TOOLS)}. "
        "See python -m aiobootstrap COMMAND --help.",
    )
    parser.add_argument("--version", action="version", version=f"aiobootstrap {__version__}")
    parser.add_argument("--host", default=_DEFAULTS.host, help="address to listen on (default: %(default)s)")
    parser.add_argument(
        "--port",
        type=int,
        default=_DEFAULTS.port,
        help="port to listen on; 0 picks a free one (default: %(default)s)",
    )
    parser.add_argument(
        "--world-size",
        type=int,
        default=_DEFAULTS.world_size,
        metavar="W",
        help="number of ranks; others are refused (default: any)",
    )
    parser.add_argument(
        "--max-wait",
        type=float,
        default=_DEFAULTS.max_wait,
        metavar="SECONDS",
        help="longest wait one request may ask for; longer asks are clamped (default: %(default)g)",
    )
    parser.add_argument(
        "--max-body-size",
        type=int,
        default=_DEFAULTS.max_body_size,
        metavar="BYTES",
        help=f"largest request body accepted (default: %(default)d, {_DEFAULTS.max_body_size / 2**20:g} MiB)",
    )
    parser.add_argument(
        "--max-body-memory",
        type=int,
        default=_DEFAULTS.max_body_memory,
        metavar="BYTES",
        help=(
            "most bytes of request bodies read at once, all requests together; past it 503 with "
            f"Retry-After (default: %(default)d, {_DEFAULTS.max_body_memory / 2**20:g} MiB)"
        ),
    )
    parser.add_argument(
        "--max-waiters",
        type=int,
        default=None,
        metavar="N",
        help=(
            "most waits parked at once; more get 503 with Retry-After "
            f"(default: {_DEFAULTS.max_waiters}, lowered to fit the open file limit)"
        ),
    )
    parser.add_argument(
        "--max-namespaces",
        type=int,
        default=_DEFAULTS.max_namespaces,
        metavar="N",
        help="most namespaces with ranks or waits at once, default included (default: %(default)d)",
    )
    parser.add_argument(
        "--state-file",
        default=_DEFAULTS.state_file,
        metavar="PATH",
        help="journal registrations to PATH and reload them on start; the same as --store file:PATH",
    )
    parser.add_argument(
        "--store",
        default=None,
        metavar="URL",
        help=(
            "where records live: memory:, file:PATH, redis://[user:password@]host[:port][/db], "
            f"rediss://..., unix:///path/redis.sock[?db=N] (or set {STORE_ENV}; default: {DEFAULT_STORE})"
        ),
    )
    parser.add_argument(
        "--store-prefix",
        default=_DEFAULTS.store_prefix,
        metavar="NAME",
        help="prefix of every key in a Redis store, to keep registries apart (default: %(default)s)",
    )
    parser.add_argument(
        "--max-ranks",
        type=int,
        default=_DEFAULTS.max_ranks,
        metavar="N",
        help="most distinct ranks per namespace without --world-size; more get 409; 0 for no cap (default: %(default)d)",
    )
    parser.add_argument(
        "--max-request-line",
        type=int,
        default=_DEFAULTS.max_request_line,
        metavar="BYTES",
        help="longest request line (path and query) accepted (default: %(default)d)",
    )
    parser.add_argument(
        "--max-header-size",
        type=int,
        default=_DEFAULTS.max_header_size,
        metavar="BYTES",
        help="longest single header line accepted (default: %(default)d)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=_DEFAULTS.max_connections,
        metavar="N",
        help=(
            "most connections open at once; a new one past it closes the longest-idle connection "
            f"(never one with a request in flight) (default: the open file limit less {_open_files.CONNECTION_FD_RESERVE})"
        ),
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=_DEFAULTS.idle_timeout,
        metavar="SECONDS",
        help="close a connection that sends no complete request for this long (default: %(default)g)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=_DEFAULTS.body_timeout,
        metavar="SECONDS",
        help="longest a request body may take to arrive; then 408 (default: %(default)g)",
    )
    parser.add_argument(
        "--auth-token-file",
        metavar="PATH",
        help=f"require 'Authorization: Bearer <token>' with the token in PATH (or set {TOKEN_ENV})",
    )
    parser.add_argument("--tls-cert", metavar="PATH", help="serve HTTPS with this PEM certificate chain")
    parser.add_argument("--tls-key", metavar="PATH", help="the PEM private key for --tls-cert")
    parser.add_argument("--log-level", choices=_LOG_LEVELS, default="info", help="(default: %(default)s)")
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text for people, json for log pipelines: one object per line (default: %(default)s)",
    )
    parser.add_argument(
        "--access-log",
        action="store_true",
        default=_DEFAULTS.access_log,
        help="log one line per request (default: off)",
    )
    return parser


def _config(args: argparse.Namespace, environ: Mapping[str, str]) -> ServerConfig:
    return ServerConfig(
        host=args.host,
        port=args.port,
        world_size=args.world_size,
        max_wait=args.max_wait,
        max_body_size=args.max_body_size,
        max_body_memory=args.max_body_memory,
        max_waiters=_open_files.waiter_limit(args.max_waiters, DEFAULT_MAX_WAITERS),
        # 0 switches the cap off; a world size lifts it anyway.
        max_ranks=args.max_ranks or None,
        max_request_line=args.max_request_line,
        max_header_size=args.max_header_size,
        max_connections=args.max_connections,
        idle_timeout=args.idle_timeout,
        body_timeout=args.body_timeout,
        auth_token=_auth_token(args.auth_token_file, environ),
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        max_namespaces=args.max_namespaces,
        access_log=args.access_log,
        state_file=args.state_file,
        store=_store_url(args.store, args.state_file, environ),
        store_prefix=args.store_prefix,
    )


def _store_url(given: str | None, state_file: str | None, environ: Mapping[str, str]) -> str:
    """``--store``, else the environment, else the embedded memory store.

    ``--state-file`` names the store itself, so the environment gives way to it.
    """
    if given is not None:
        return given
    if state_file is not None:
        return DEFAULT_STORE
    return environ.get(STORE_ENV) or DEFAULT_STORE


def _auth_token(path: str | None, environ: Mapping[str, str]) -> str | None:
    """The token from ``--auth-token-file`` (which wins) or the environment; ``None`` for no auth."""
    if path is not None:
        try:
            with open(path, encoding="utf-8") as file:
                token = file.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise ValueError(f"cannot read the auth token file {path}: {reason}") from None
        if not token:
            raise ValueError(f"the auth token file {path} is empty")
        return token
    if TOKEN_ENV not in environ:
        return None
    token = environ[TOKEN_ENV].strip()
    if not token:
        # Set but empty is a mistake, not a wish to run without authentication.
        raise ValueError(f"{TOKEN_ENV} is set but empty")
    return token


async def serve(config: ServerConfig, socks: Sequence[socket.socket]) -> int:
    """Serve on the bound ``socks`` until SIGTERM or SIGINT; the exit status."""
    # First: a signal that comes while the server is imported or starts is then
    # an orderly stop (exit 0), not asyncio's KeyboardInterrupt or SIGTERM's kill.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    from ..server.server import BootstrapServer

    server = BootstrapServer(config)
    try:
        await server.start(socks)
    except BootstrapError as exc:
        print(exc.detail, file=sys.stderr)
        return 1
    print(f"aiobootstrap listening on {server.url}", flush=True)
    try:
        await stop.wait()
        log.info("stopping: answering parked waits and closing")
    finally:
        # Nothing allocated so far needs the cycle collector any more: the
        # process ends in a moment and the system takes its memory back. Left
        # in the collector's generations, ten thousand parked connections
        # cost full collections of 0.4-0.8 s during the stop, which found
        # nothing to free. Off and frozen, the collector leaves the stop alone
        # and skips the frozen heap at exit; memory is still freed by
        # reference counting.
        gc.disable()
        gc.freeze()
        await server.close()
    return 0


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (the ``fast`` extra): faster at writing large replies, see docs/benchmarks.md."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _tool(argv: Sequence[str]) -> int:
    parser = _Parser(prog="python -m aiobootstrap", description="Operator tools for an aiobootstrap server.")
    add_tool_parsers(parser)
    args = parser.parse_args(argv)
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    try:
        return asyncio.run(run_tool(args, token=token, out=sys.stdout, err=sys.stderr))
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in TOOLS:
        return _tool(argv)
    if argv and argv[0] == "serve":
        argv = argv[1:]
    args = _parser().parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    tune_collector()
    # Before the config: the default waiter limit fits the raised open file limit.
    _open_files.raise_open_file_limit()
    try:
        config = _config(args, os.environ)
    except ValueError as exc:
        print(f"python -m aiobootstrap: {exc}", file=sys.stderr)
        return 2
    try:
        socks = bind_sockets(config.host, config.port)
    except AddressInUse as exc:
        print(explain_address_in_use(exc).detail, file=sys.stderr)
        return 2
    except BootstrapError as exc:
        print(exc.detail, file=sys.stderr)
        return 1
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            return runner.run(serve(config, socks))
    except KeyboardInterrupt:  # interrupted before the signal handlers were in place
        return 130
    finally:
        for sock in socks:
            sock.close()
