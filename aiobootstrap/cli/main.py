"""The command line: argv -> config -> run. The only module that installs
signal handlers or prints for the user; ``parser`` reads argv and the
environment for it.

It binds the port before importing the server: a taken port, the commonest
start-up failure, is then reported without waiting for aiohttp to import.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .._logging import setup_logging
from ..exceptions import BootstrapError
from ..server import open_files as _open_files
from ..server.config import ServerConfig
from .gc import tune_collector
from .parser import (
    PROG,
    parse_tool_args,
    server_config,
    server_parser,
    tool_token,
    usage_error,
)
from .stop_deadline import STOP_GRACE, StopDeadline
from .token_file import read_token_file
from .tools import TOOLS, run_tool

if TYPE_CHECKING:
    from ..server.server import BootstrapServer

__all__ = ["loop_factory", "main"]

log = logging.getLogger("aiobootstrap")


async def serve(
    config: ServerConfig,
    socks: Sequence[socket.socket],
    token_file: str | None = None,
    listen_socks: Sequence[Sequence[socket.socket]] = (),
) -> int:
    """Serve on the bound ``socks`` (and each ``--listen`` listener's ``listen_socks``) until SIGTERM or
    SIGINT; the exit status.

    With a ``token_file``, SIGHUP re-reads it and puts its tokens in force.
    """
    # First: a signal that comes while the server is imported or starts is then
    # an orderly stop (exit 0), not asyncio's KeyboardInterrupt or SIGTERM's kill.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    started: asyncio.Future[None] = loop.create_future()
    if token_file is not None:
        # A SIGHUP during the start is done once the server is up: no rotation is lost, none kills it.
        loop.add_signal_handler(
            signal.SIGHUP, lambda: started.add_done_callback(lambda _: _rotate(server, token_file))
        )
    from ..server.server import BootstrapServer

    server = BootstrapServer(config)
    try:
        await server.start(socks, listen_socks=listen_socks)
    except BootstrapError as exc:
        print(exc.detail, file=sys.stderr)
        return 1
    started.set_result(None)
    # The first line is the main listener's, as scripts read it; each other line never matches it.
    lines = [f"aiobootstrap listening on {server.url}"]
    lines += [f"namespace {namespace} also listening on {url}" for namespace, url in server.listeners]
    print("\n".join(lines), flush=True)
    deadline = StopDeadline(loop, config.shutdown_timeout + STOP_GRACE)
    try:
        await stop.wait()
        log.info("stopping: answering parked waits and closing")
    finally:
        deadline.arm()
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
        deadline.disarm()
    return 0


def _rotate(server: BootstrapServer, token_file: str) -> None:
    """SIGHUP: the token file's tokens in force now; a file that does not parse leaves the old ones."""
    try:
        tokens = read_token_file(token_file)
    except ValueError as exc:
        log.error("SIGHUP: %s; the auth tokens in force are unchanged", exc)
        return
    server.rotate_tokens(tokens)
    log.info("SIGHUP: %d auth tokens in force, read from %s", len(tokens), token_file)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (the ``fast`` extra): faster at writing large replies, see docs/benchmarks.md."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


EXIT_BROKEN_PIPE = 141
"""A tool whose reader went away (``status | head``): the status of a process SIGPIPE ended."""


def _tool(argv: Sequence[str]) -> int:
    """Run one tool to its end; Ctrl-C is exit status 130, a reader gone is 141, never a traceback."""
    args = parse_tool_args(argv, os.environ)
    token = tool_token(args.token, os.environ)
    try:
        status = asyncio.run(run_tool(args, token=token, out=sys.stdout, err=sys.stderr))
        sys.stdout.flush()  # here, where a reader gone is caught, not at exit
        return status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Nothing more can reach the reader; nor can the interpreter's last flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


EXIT_MISSING_DEPENDENCY = 1
"""A package aiobootstrap needs (aiohttp...) is not installed in this python."""


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: run the tool ``argv`` names, else serve; the exit status.

    A dependency missing from this python (the system's, not the ``.venv``
    aiobootstrap was installed in) is one line naming it, not a traceback.
    """
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if not missing or missing == "aiobootstrap":
            raise  # aiobootstrap's own module: a bug, not a missing install
        print(
            f"{PROG}: the package {missing!r} is missing from {sys.executable}: run the python "
            "aiobootstrap is installed in (.venv/bin/python -m aiobootstrap, or . .venv/bin/activate "
            "first), or pip install aiobootstrap into this one",
            file=sys.stderr,
        )
        return EXIT_MISSING_DEPENDENCY


def _main(argv: list[str]) -> int:
    if argv and argv[0] in TOOLS:
        return _tool(argv)
    if argv and argv[0] == "serve":
        argv = argv[1:]
    elif argv and not argv[0].startswith("-"):
        # The server takes options only: a word is a command mistyped (stat, gett).
        usage_error(PROG, f"unknown command {argv[0]!r}: give one of {', '.join((*TOOLS, 'serve'))}")
    try:
        parser = server_parser()  # loads each installed face's settings: another package's may be broken
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    tune_collector()
    # Before the config: the default waiter limit fits the raised open file limit.
    _open_files.raise_open_file_limit()
    try:
        config = server_config(args, os.environ)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    # Here, not at the top: a tool binds nothing, and the holder-naming machinery costs it 13 ms to import.
    from ..server.bind import AddressInUse, bind_each, bind_sockets, explain_address_in_use

    socks: list[socket.socket] = []
    listen_socks: list[list[socket.socket]] = []
    try:
        try:
            remedy = "pick another with --port"
            socks = bind_sockets(config.host, config.port)
            remedy = "pick another with --listen"
            listen_socks = bind_each([listener.address(config.host) for listener in config.listen])
        except AddressInUse as exc:
            print(explain_address_in_use(exc, remedy).detail, file=sys.stderr)
            return 2
        except BootstrapError as exc:
            print(exc.detail, file=sys.stderr)
            return 1
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            return runner.run(serve(config, socks, args.auth_token_file, listen_socks))
    except KeyboardInterrupt:  # interrupted before the signal handlers were in place
        return 130
    finally:
        for sock in [*socks, *(each for bound in listen_socks for each in bound)]:
            sock.close()
