"""The tools' arguments: ``get``, ``register``, ``status`` and ``wait`` as subcommands.

Every value is checked here, so a bad one is argparse's one line and exit
status 2 before anything is sent; ``wait=`` and ``--wait`` share the wire's
reader of seconds. What each tool does with its arguments is ``tools``'.
"""

from __future__ import annotations

import argparse
import itertools
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import _json
from .._names import DEFAULT_NAMESPACE, DEFAULT_ROLE, ENCODER_URLS, RANK_KINDS, TRANSFER_ENGINE_INFO
from ..exceptions import BadRequest
from ..server.config import DEFAULT_HOST, DEFAULT_PORT
from ..wire.metadata import METADATA
from ..wire.params import parse_ranks, parse_seconds
from ..wire.prefill import PREFILL_RANK
from ..wire.routes import NAMESPACE_PREFIX
from ..wire.vllm import VLLM_WORKER
from .watch_tool import add_watch_parser

__all__ = ["DEFAULT_URL", "KINDS", "TOKEN_ENV", "URL_ENV", "add_tool_parsers", "is_tool_url", "tool_url"]

TOKEN_ENV = "AIOBOOTSTRAP_AUTH_TOKEN"
"""The variable holding the bearer token: the server's one token, and the tools' unless ``--token``."""
URL_ENV = "AIOBOOTSTRAP_URL"
"""The variable holding the tools' server, unless ``--url``."""
DEFAULT_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
"""The tools' server without ``--url`` or ``$AIOBOOTSTRAP_URL``: the server's own default address."""


def _non_negative(what: str) -> Callable[[str], int]:
    """The reader of a non-negative integer that names a ``what`` (a rank, a version)."""

    def read(text: str) -> int:
        if not text.isascii() or not text.isdigit():
            raise argparse.ArgumentTypeError(f"{text!r} is not a {what} (a non-negative integer)")
        return int(text)

    return read


_rank = _non_negative("rank")
_version = _non_negative("version")


def _count(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def is_tool_url(text: str) -> bool:
    """Whether ``text`` is a server's URL a tool can ask: ``http://`` or ``https://`` and a host."""
    parts = urllib.parse.urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def tool_url(given: str | None, environ: Mapping[str, str]) -> str:
    """The tools' server: ``--url`` (``given``), else ``environ``'s ``AIOBOOTSTRAP_URL``, else the server's
    default address; a ``ValueError`` when the variable's is not a URL a tool can ask."""
    if given is not None:
        return given
    url = environ.get(URL_ENV, "").strip() or DEFAULT_URL
    if not is_tool_url(url):
        raise ValueError(f"{URL_ENV}={url!r} is not an http:// or https:// URL")
    return url


def _url(text: str) -> str:
    if not is_tool_url(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL")
    return text


def _seconds(text: str) -> float:
    # The wire's reader: what a tool takes is what wait= takes on the wire.
    seconds = parse_seconds(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative number of seconds")
    return seconds


def _role(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("a role is a non-empty name, such as target or draft")
    return text


def _ranks_spec(text: str) -> str:
    try:
        parse_ranks(text)
    except BadRequest as exc:
        raise argparse.ArgumentTypeError(exc.detail) from None
    return text


def _session_id(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("a session id is a non-empty string, such as 10.0.0.7:18000")
    return text


def _key(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("a metadata key is a non-empty string, such as mooncake/ram/h:18000")
    return text


def _field(text: str) -> tuple[str, Any]:
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=JSON (such as tp_size=8)")
    try:
        return key, _json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise argparse.ArgumentTypeError(
            f"the value of {key!r} is not JSON ({exc}); a string is quoted"
        ) from None


KINDS = (*RANK_KINDS, ENCODER_URLS)
"""What ``--kind`` of ``get`` and ``status`` may name (``get`` also a metadata key's, ``--key``)."""
WAIT_KINDS = (*RANK_KINDS, PREFILL_RANK, VLLM_WORKER)
"""What ``wait --kind`` may name: a per-rank kind of a world size, a prefill deployment's ranks, or a
vLLM deployment's workers (of the sizes given)."""


RANK_TOOLS = ("get", "register")
"""The tools that take ``--rank``, whose most natural first try is the rank alone (``get 3``)."""


def bare_rank(argv: Sequence[str]) -> str | None:
    """The rank given without ``--rank`` to a tool of :data:`RANK_TOOLS` (``get 3``), else ``None``.

    Asked before argparse, which would answer ``register 3`` with ``--rank`` missing
    and ``get 3`` with an unrecognized argument, neither saying what was meant.
    """
    if not argv or argv[0] not in RANK_TOOLS:
        return None
    for before, word in itertools.pairwise(argv):
        # A number after an option is that option's value (--timeout 3); after the tool or a value, a bare word.
        if word.isdecimal() and not before.startswith("-"):
            return word
    return None


def namespace_in_url(url: str, namespace: str) -> tuple[str, str]:
    """``url`` and ``namespace``, a namespace in the URL's path (``http://h:p/ns/prefill-0``) moved to the second.

    The page's address bar shows a namespace so; given as ``--url``, the
    requests went to it while the tool said "namespace default". Named both
    ways differently, it is a mistake, raised as a ``ValueError``.
    """
    head, marker, name = url.rstrip("/").rpartition(NAMESPACE_PREFIX)
    if not marker or not name or "/" in name or "://" not in head:
        return url, namespace
    name = urllib.parse.unquote(name)
    if namespace not in (DEFAULT_NAMESPACE, name):
        raise ValueError(f"--url names namespace {name} and --namespace {namespace}: give it once")
    return head, name


def add_tool_parsers(parser: argparse.ArgumentParser) -> None:
    """Add the tools to ``parser`` as subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        type=_url,
        default=None,
        help=f"the server (default: ${URL_ENV}, else {DEFAULT_URL})",
    )
    common.add_argument(
        "--namespace",
        default=DEFAULT_NAMESPACE,
        help="the deployment's namespace on the server (default: %(default)s)",
    )
    common.add_argument(
        "--token",
        default=None,
        help=f"bearer token, if the server requires one (default: ${TOKEN_ENV})",
    )
    common.add_argument(
        "--cacert",
        metavar="PATH",
        help="PEM file of the CA that signed an https server's certificate (default: the system's CAs)",
    )
    tools = parser.add_subparsers(dest="tool", metavar="COMMAND", required=True)

    role = argparse.ArgumentParser(add_help=False)
    role.add_argument(
        "--role",
        type=_role,
        default=DEFAULT_ROLE,
        help="the records of this role, such as draft (default: %(default)s)",
    )

    get = tools.add_parser(
        "get",
        parents=[common, role],
        help="print a rank's info, parallelism config, or the encoder URL list as JSON; or a metadata "
        "key's value",
        description="Print a rank's record of one kind, or the encoder URL list, as JSON; or, with --key, "
        "a Mooncake metadata key's value, its bytes as stored.",
    )
    get.add_argument("--rank", type=_rank, help="the rank (every kind but encoder_urls and metadata)")
    get.add_argument(
        "--key",
        type=_key,
        metavar="KEY",
        help=f"a metadata key, such as mooncake/ram/10.0.0.7:18000: print its value (--kind {METADATA})",
    )
    get.add_argument(
        "--kind",
        choices=(*KINDS, METADATA),
        default=None,
        help=f"what to get (default: {TRANSFER_ENGINE_INFO}, {METADATA} with --key)",
    )
    get.add_argument(
        "--wait",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for the rank or key to register, or the encoder URL list to change "
        "(default: do not wait)",
    )
    get.add_argument(
        "--after",
        type=_version,
        default=0,
        metavar="VERSION",
        help="only a record (list, value) newer than this version (default: any)",
    )

    register = tools.add_parser(
        "register",
        parents=[common, role],
        help="register a rank's info or parallelism config",
        description="Register a rank's record of one kind: transfer-engine info (a session id, weights "
        "and any other fields, such as a NIXL backend's) or a parallelism config.",
    )
    register.add_argument("--rank", type=_rank, required=True, help="the rank whose record this is")
    register.add_argument(
        "--kind",
        choices=RANK_KINDS,
        default=TRANSFER_ENGINE_INFO,
        help="what to register (default: %(default)s)",
    )
    register.add_argument(
        "--session-id",
        type=_session_id,
        help="the transfer engine's session id, such as 10.0.0.7:18000 (required unless the info "
        "file or a --field gives it, or the info is a tagged backend's)",
    )
    register.add_argument(
        "--weights-file",
        metavar="FILE",
        help="a JSON object: the weights_info_dict ('-' reads standard input; default: {})",
    )
    register.add_argument(
        "--info-file",
        metavar="FILE",
        help="a JSON object: the whole record (the transfer_engine_info, such as a NIXL backend's, "
        "or the parallelism config); the other options add to it ('-' reads standard input)",
    )
    register.add_argument(
        "--field",
        action="append",
        type=_field,
        default=[],
        metavar="KEY=JSON",
        help="one more field of the record, its value JSON (backend='\"nixl\"', tp_size=8); repeat for several",
    )
    register.add_argument(
        "--timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="keep trying this long while the server is unreachable (default: %(default)g)",
    )
    register.add_argument(
        "--lease-ttl",
        type=_seconds,
        metavar="SECONDS",
        help="register on a lease of this TTL (1 to 86400), kept alive until interrupted, then revoked",
    )

    status = tools.add_parser(
        "status",
        parents=[common],
        help="list the registered ranks of each kind and role",
        description="List the registered ranks of each kind and role and, with a known world size, "
        "the missing ones; and the encoder URLs. Exit 1 when a known world size has ranks missing.",
    )
    status.add_argument(
        "--kind",
        action="append",
        choices=KINDS,
        help="show this kind; repeat for several (default: every kind)",
    )
    status.add_argument(
        "--role",
        action="append",
        type=_role,
        help=f"show the ranks of this role; repeat for several (default: {DEFAULT_ROLE})",
    )
    status.add_argument(
        "--world-size",
        type=_count,
        default=None,
        metavar="N",
        help="ranks 0 to N-1 are expected (default: the server's --world-size, if it has one)",
    )
    status.add_argument(
        "--namespaces",
        action="store_true",
        help="list the server's namespaces (those the token may see) instead of one namespace's ranks",
    )
    status.add_argument(
        "--watch",
        action="store_true",
        help="follow the namespace until interrupted: on a terminal a line per kind and role, redrawn "
        "in place at each change; else each change as a line",
    )

    add_watch_parser(tools, common, ranks=_ranks_spec, version=_version)

    wait = tools.add_parser(
        "wait",
        parents=[common, role],
        help="exit 0 once every rank is registered",
        description="Wait until ranks 0 to N-1 have all registered a record of the kind and role, then "
        "exit 0 (for scripts and init containers). Exit 1 if the timeout runs out first. Without a world "
        f"size (--world-size, or the server's), a namespace holding a prefill deployment is waited for "
        f"until every rank of its topology registered, as --kind {PREFILL_RANK} asks (which also waits "
        "for its first rank); --tp-size N (--dp-size, --pp-size) waits for a vLLM deployment of those "
        "sizes.",
    )
    wait.add_argument(
        "--world-size",
        type=_count,
        default=None,
        metavar="N",
        help="ranks 0 to N-1 are expected (default: the server's --world-size)",
    )
    wait.add_argument(
        "--kind",
        choices=WAIT_KINDS,
        default=None,
        help=f"what each rank registers (default: {TRANSFER_ENGINE_INFO}; {PREFILL_RANK} without a world "
        "size in a namespace holding a prefill deployment)",
    )
    wait.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="give up after this long (default: wait for ever)",
    )
    for axis in ("tp", "pp", "dp"):
        wait.add_argument(
            f"--{axis}-size",
            type=_count,
            default=None,
            metavar="N",
            help=f"a vLLM deployment's {axis} size: wait for its workers (--kind {VLLM_WORKER}; "
            "--tp-size with --pp-size, dp ranks counted alone with --dp-size)",
        )
