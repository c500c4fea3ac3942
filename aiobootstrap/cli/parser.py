"""What the command line is asked: argv and the environment, read into a config.

The only reader of the environment (``AIOBOOTSTRAP_STORE``,
``AIOBOOTSTRAP_AUTH_TOKEN``, the tools' ``AIOBOOTSTRAP_URL``; the faces' settings read their engines' variables,
each in its face's folder). ``serve``'s options take their defaults from
:class:`ServerConfig`, and each installed face adds its own (``Face.settings``:
``add_arguments``, ``from_arguments``), so ``--help`` cannot disagree with
them; the tools' options are ``tool_parser``'s. Parsing imports no aiohttp:
``main`` binds the port before the server's libraries load (the faces'
settings are read without loading the faces, ``server.face_registry``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, NoReturn

from .._logging import LOG_FORMATS
from .._version import __version__
from ..server import face_registry
from ..server import open_files as _open_files
from ..server.config import AUTH_READS, DEFAULT_MAX_WAITERS, DEFAULT_STORE, NamespaceListener, ServerConfig
from .token_file import read_token_file
from .tool_parser import TOKEN_ENV, URL_ENV, add_tool_parsers, bare_rank, namespace_in_url, tool_url
from .tools import TOOLS

__all__ = [
    "PROG",
    "STORE_ENV",
    "TOKEN_ENV",
    "URL_ENV",
    "OneLineParser",
    "parse_tool_args",
    "server_config",
    "server_parser",
    "tool_parser",
    "tool_token",
]

PROG = "python -m aiobootstrap"

_LOG_LEVELS = ("debug", "info", "warning", "error")

STORE_ENV = "AIOBOOTSTRAP_STORE"


_DEFAULTS = ServerConfig()
"""Every option's default is the config's: ``--help`` cannot say otherwise."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        usage_error(self.prog, message)


def usage_error(prog: str, message: str) -> NoReturn:
    """Exit 2 with ``message`` on one line, not argparse's usage block, naming where help is."""
    sys.stderr.write(f"{prog}: {message} (see {prog} --help)\n")
    raise SystemExit(2)


def _setting(
    parser: argparse.ArgumentParser,
    flag: str,
    help: str,
    *,
    type: Callable[[str], Any] = str,
    metavar: str | None = None,
) -> None:
    """An option whose default is the config's field of its name (``--max-wait``: ``max_wait``)."""
    default = getattr(_DEFAULTS, flag.removeprefix("--").replace("-", "_"))
    parser.add_argument(flag, type=type, default=default, metavar=metavar, help=help)


def server_parser() -> argparse.ArgumentParser:
    """The options of ``serve``, the default command."""
    parser = OneLineParser(
        prog=PROG,
        description="Serve transfer-engine info to the ranks of a deployment; getters may wait.",
        epilog=f"Commands: serve (the default; takes the options above), {', '.join(TOOLS)}. "
        "See python -m aiobootstrap COMMAND --help.",
    )
    setting = partial(_setting, parser)
    mib = 2**20
    parser.add_argument("--version", action="version", version=f"aiobootstrap {__version__}")
    setting("--host", "address to listen on (default: %(default)s)")
    setting("--port", "port to listen on; 0 picks a free one (default: %(default)s)", type=int)
    parser.add_argument(
        "--listen",
        type=_listener,
        action="append",
        default=[],
        metavar="[HOST:]PORT=NAMESPACE",
        help="also listen on PORT (of HOST, default --host's) with NAMESPACE's routes unprefixed, for engines "
        "that name their server by host:port alone; repeatable, each its own port; 0 picks a free one",
    )
    setting("--world-size", "number of ranks; others are refused (default: any)", type=int, metavar="W")
    setting(
        "--max-wait",
        "longest wait one request may ask for; longer asks are clamped (default: %(default)g)",
        type=float,
        metavar="SECONDS",
    )
    setting(
        "--max-body-size",
        f"largest request body accepted (default: %(default)d, {_DEFAULTS.max_body_size / mib:g} MiB)",
        type=int,
        metavar="BYTES",
    )
    setting(
        "--max-body-memory",
        "most bytes of request bodies read at once, all requests together; past it 503 with "
        f"Retry-After (default: %(default)d, {_DEFAULTS.max_body_memory / mib:g} MiB)",
        type=int,
        metavar="BYTES",
    )
    parser.add_argument(
        "--max-waiters",
        type=int,
        default=None,  # the config's, lowered to fit the open file limit: see server_config
        metavar="N",
        help=(
            "most waits parked at once; more get 503 with Retry-After "
            f"(default: {_DEFAULTS.max_waiters}, lowered to fit the open file limit)"
        ),
    )
    setting(
        "--max-namespaces",
        "most namespaces holding records at once, default included, counted in the store (so across "
        "replicas); a registration that would make another gets 503 (default: %(default)d)",
        type=int,
        metavar="N",
    )
    setting(
        "--max-leases",
        "most leases held at once, every namespace together, a namespace at most half of what the others leave "
        "free; past either a grant is a 409 (default: %(default)d)",
        type=int,
        metavar="N",
    )
    setting(
        "--state-file",
        "journal registrations to PATH and reload them on start; the same as --store file:PATH",
        metavar="PATH",
    )
    parser.add_argument(
        "--store",
        default=None,  # the environment's, else the config's: see _store_url
        metavar="URL",
        help=(
            "where records live: memory:, file:PATH, redis://[user:password@]host[:port][/db], "
            "rediss://..., unix:///path/redis.sock[?db=N], redis+sentinel://host:port[,host:port...]/MASTER"
            "[?sentinel_password=P], rediss+sentinel://..., etcd://[user:password@]host:port[,host:port...]"
            "[?prefix=NAME], etcds://...[?cacert=PATH] (or set "
            f"{STORE_ENV}, which keeps a URL's passwords out of process listings; default: {DEFAULT_STORE})"
        ),
    )
    setting(
        "--store-prefix",
        "prefix of every key in a Redis store, to keep registries apart (default: %(default)s)",
        metavar="NAME",
    )
    setting(
        "--store-min-replicas",
        "acknowledge a write only once N Redis replicas hold it (WAIT), else 503; 0: once the primary "
        "does (default: %(default)d)",
        type=int,
        metavar="N",
    )
    setting(
        "--max-ranks",
        "most distinct ranks per namespace without --world-size; more get 409; 0 for no cap (default: %(default)d)",
        type=int,
        metavar="N",
    )
    setting(
        "--max-roles",
        "most distinct roles per namespace and record kind; more get 409; 0 for no cap (default: %(default)d)",
        type=int,
        metavar="N",
    )
    setting(
        "--max-request-line",
        "longest request line (path and query) accepted (default: %(default)d)",
        type=int,
        metavar="BYTES",
    )
    setting(
        "--max-header-size",
        "longest single header line accepted (default: %(default)d)",
        type=int,
        metavar="BYTES",
    )
    setting(
        "--max-connections",
        "most connections open at once; a new one past it closes the longest-idle connection (never one "
        f"with a request in flight) (default: the open file limit less {_open_files.CONNECTION_FD_RESERVE})",
        type=int,
        metavar="N",
    )
    setting(
        "--watch-history",
        "changes GET /watch keeps per namespace; an older after= is 410 (default: %(default)d)",
        type=int,
        metavar="N",
    )
    setting(
        "--watch-history-memory",
        "bytes the kept changes of all namespaces may cost; past it the largest logs lose their oldest "
        f"(default: %(default)d, {_DEFAULTS.watch_history_memory / mib:g} MiB)",
        type=int,
        metavar="BYTES",
    )
    setting(
        "--idle-timeout",
        "close a connection that sends no complete request for this long (default: %(default)g)",
        type=float,
        metavar="SECONDS",
    )
    setting(
        "--body-timeout",
        "longest a request body may take to arrive; then 408 (default: %(default)g)",
        type=float,
        metavar="SECONDS",
    )
    parser.add_argument(
        "--faces",
        type=_face_names,
        default=None,
        metavar="NAME[,NAME...]",
        help=f"serve only these faces (default: every one installed: {', '.join(face_registry.face_names())})",
    )
    for settings in face_registry.installed_settings():
        settings.add_arguments(parser)  # each face's options, its defaults in their help
    parser.add_argument(
        "--auth-token-file",
        metavar="PATH",
        help="require 'Authorization: Bearer <token>' with a token of PATH: one a line, each optionally "
        f"scoped 'ns=NAME[,NAME...]' and 'read'; SIGHUP re-reads it (or set {TOKEN_ENV} to one token)",
    )
    parser.add_argument(
        "--auth-reads",
        choices=AUTH_READS,
        default=_DEFAULTS.auth_reads,
        help="token: every route but the probes needs a token; open: anyone may read, writes need a "
        "token whose scope covers them (default: %(default)s)",
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


def server_config(args: argparse.Namespace, environ: Mapping[str, str]) -> ServerConfig:
    """The config ``serve``'s parsed ``args`` and ``environ`` ask for; ``ValueError`` says what is wrong."""
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
        max_roles=args.max_roles or None,
        max_request_line=args.max_request_line,
        max_header_size=args.max_header_size,
        max_connections=args.max_connections,
        idle_timeout=args.idle_timeout,
        body_timeout=args.body_timeout,
        auth_token=_auth_token(args.auth_token_file, environ),
        auth_tokens=None if args.auth_token_file is None else read_token_file(args.auth_token_file),
        auth_reads=args.auth_reads,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        max_namespaces=args.max_namespaces,
        max_leases=args.max_leases,
        access_log=args.access_log,
        state_file=args.state_file,
        store=_store_url(args.store, args.state_file, environ),
        store_prefix=args.store_prefix,
        store_min_replicas=args.store_min_replicas,
        watch_history=args.watch_history,
        watch_history_memory=args.watch_history_memory,
        settings=tuple(
            settings.from_arguments(args, environ) for settings in face_registry.installed_settings()
        ),
        faces=args.faces,
        listen=tuple(args.listen),
    )


def _listener(text: str) -> NamespaceListener:
    """``--listen [HOST:]PORT=NAMESPACE`` (``argparse`` makes the ``ValueError`` one line)."""
    try:
        return NamespaceListener.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _face_names(text: str) -> tuple[str, ...]:
    """``--faces``: installed faces' names, commas between (``argparse`` makes a ``ValueError`` one line)."""
    names = tuple(name.strip() for name in text.split(","))
    try:
        face_registry.select_names(names)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return names


def _store_url(given: str | None, state_file: str | None, environ: Mapping[str, str]) -> str:
    """``--store``, else the environment, else the embedded memory store.

    ``--state-file`` names the store itself, so the environment gives way to it, and
    a ``--store`` beside it (even ``memory:``, which the configuration cannot tell
    from no ``--store`` at all) is refused.
    """
    if given is not None and state_file is not None:
        raise ValueError(
            f"give either --state-file or --store, not both (--state-file {state_file} is --store file:{state_file})"
        )
    if given is not None:
        return given
    if state_file is not None:
        return DEFAULT_STORE
    return environ.get(STORE_ENV) or DEFAULT_STORE


def _auth_token(path: str | None, environ: Mapping[str, str]) -> str | None:
    """The environment's one token, unless ``--auth-token-file`` (which wins) is given; ``None`` for none."""
    if path is not None or TOKEN_ENV not in environ:
        return None
    token = environ[TOKEN_ENV].strip()
    if not token:
        # Set but empty is a mistake, not a wish to run without authentication.
        raise ValueError(f"{TOKEN_ENV} is set but empty")
    return token


def tool_parser() -> argparse.ArgumentParser:
    """The tools' parser: ``get``, ``register``, ``status`` and ``wait`` as subcommands."""
    parser = OneLineParser(prog=PROG, description="Operator tools for an aiobootstrap server.")
    add_tool_parsers(parser)
    return parser


def parse_tool_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> argparse.Namespace:
    """A tool's arguments; one it does not know is refused naming the tool (``... get: ...``). The server
    is ``--url``, else ``environ``'s ``AIOBOOTSTRAP_URL``, else the server's default address."""
    rank = bare_rank(argv)
    if rank is not None:
        usage_error(f"{PROG} {argv[0]}", f"unrecognized arguments: {rank}; did you mean --rank {rank}?")
    args, extras = tool_parser().parse_known_args(argv)
    if extras:
        usage_error(f"{PROG} {args.tool}", f"unrecognized arguments: {' '.join(extras)}")
    try:
        args.url, args.namespace = namespace_in_url(tool_url(args.url, environ or {}), args.namespace)
    except ValueError as exc:
        usage_error(f"{PROG} {args.tool}", str(exc))
    return args


def tool_token(given: str | None, environ: Mapping[str, str]) -> str | None:
    """A tool's bearer token: ``--token``, else the environment's; ``None`` for none."""
    return given if given is not None else environ.get(TOKEN_ENV)
