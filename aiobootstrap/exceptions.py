"""The public error tree, shared by the server, the client and the tools.

Every error a caller can see derives from :class:`BootstrapError`::

    BootstrapError
    ├── BadRequest                (400)
    │   └── UnreadableBody        (server side: a body whose framing or encoding broke)
    ├── Unauthorized              (401)
    ├── Forbidden                 (403)
    ├── NotRegistered             (404)
    │   ├── RankNotRegistered     (also a TimeoutError)
    │   └── LeaseNotFound         (the lease expired or was revoked)
    ├── RequestTimeout            (408, server side)
    ├── TooManyRanks              (409)
    │   └── TooManyOfKind         (server side: a kind's cap of records per namespace and role)
    ├── TopologyConflict          (409: a prefill rank contradicts its deployment's topology)
    ├── HistoryGone               (410: a watch's ``after`` is older than the history kept)
    ├── TooManyLeases             (409)
    ├── PayloadTooLarge           (413)
    ├── UnsupportedEncoding       (415, server side)
    ├── ServerUnavailable         (503, or no answer at all)
    │   ├── ShuttingDown
    │   ├── TooManyWaiters
    │   ├── StoreUnavailable      (the store behind the server, Redis, did not answer)
    │   ├── BodyBudgetExhausted   (server side: bodies in flight fill --max-body-memory)
    │   ├── TooManyNamespaces     (the store holds records in --max-namespaces namespaces)
    │   └── StateFileError
    ├── LeasesUnsupported         (501: the store holds no leases yet)
    ├── UnexpectedReply           (a reply the protocol does not allow: a wrong URL, a proxy's page)
    └── AddressInUse              (also an OSError)

The classes marked "server side" are raised inside the server and answered as
JSON; no caller ever catches them (a client sees the status), so they are not
exported.

Each class that maps to an HTTP reply carries its status in ``status``: the
server turns a raised error into ``{"detail": ...}`` with that status, and the
client turns a reply with that status back into the same class (see
``error_for_status``). Where one status is several errors (``409``), the one
the status does not name carries a ``code`` too, which its reply names beside
the detail (``wire.errors.error_fields``) and the client reads back. Nothing here imports the rest of the package at import
time but the leaves beneath it (``_names``, ``_ranks``): the CLI reports a
taken port before aiohttp is even imported.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Sequence
from typing import ClassVar

from ._names import host_port
from ._ranks import RankSet

__all__ = [
    "AddressInUse",
    "BadRequest",
    "BootstrapError",
    "Forbidden",
    "HistoryGone",
    "LeaseNotFound",
    "LeasesUnsupported",
    "NotRegistered",
    "PayloadTooLarge",
    "RankNotRegistered",
    "ServerUnavailable",
    "ShuttingDown",
    "StateFileError",
    "StoreUnavailable",
    "TooManyLeases",
    "TooManyNamespaces",
    "TooManyRanks",
    "TooManyWaiters",
    "TopologyConflict",
    "Unauthorized",
    "UnexpectedReply",
    "error_for_status",
]

SHUTTING_DOWN_DETAIL = "The server is shutting down."

ENGINE_INFO_NOUN = "transfer engine info"
"""How transfer-engine info is named in the sentences of its 404s."""

_DETAIL_RANGES = 20
"""How many ranges a "not registered" sentence names before it says "and N more"."""


def missing_ranks_detail(missing: Sequence[int] | RankSet, noun: str = ENGINE_INFO_NOUN) -> str:
    """The sentence for ranks not registered (SPEC sections 1 and 7), naming at most a few ranges.

    ``noun`` names the record kind: ``No parallelism config for rank 3``. The
    server's 404 says it, and a :class:`RankNotRegistered` the client raises.
    """
    ranks = missing if isinstance(missing, RankSet) else RankSet.from_ranks(missing)
    if len(ranks) == 1:
        return f"No {noun} for rank {ranks.first}"
    more = len(ranks.ranges) - _DETAIL_RANGES
    tail = f" and {more} more ranges" if more > 0 else ""
    return f"No {noun} for ranks {ranks.format(_DETAIL_RANGES)}{tail}"


class BootstrapError(Exception):
    """Root of every error aiobootstrap raises."""

    status: int = 500
    code: ClassVar[str | None] = None
    """What tells this error's reply from another of the same status (``409`` is three), or ``None``
    for the error its status names: a reply's ``"code"`` field, read back by :func:`error_for_status`."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class BadRequest(BootstrapError):
    """The request was malformed; the detail says which part (HTTP 400)."""

    status = 400


class Unauthorized(BootstrapError):
    """The bearer token was missing or wrong (HTTP 401)."""

    status = 401


class Forbidden(BootstrapError):
    """The token is known but its scope does not cover the request (HTTP 403).

    Another namespace's records, or a write with a read-only token; the detail
    says which.
    """

    status = 403


class NotRegistered(BootstrapError):
    """The server has no info for the asked rank(s) (HTTP 404)."""

    status = 404


class TooManyRanks(BootstrapError):
    """The server already stores as many distinct ranks as it allows (HTTP 409).

    Not a 503: waiting does not help until a rank is unregistered or the
    server is given a world size, so the client raises it at once.
    """

    status = 409


class TooManyOfKind(TooManyRanks):
    """The namespace already holds as many records of one kind, under one role, as the kind's cap allows
    (HTTP 409; a client reads it as :class:`TooManyRanks`).

    A face declares the cap of a kind it owns (``KindSpec.cap``); the store
    checks it atomically with the write, in place of the rank limit. The
    detail names the kind and the cap.
    """

    def __init__(self, kind: str, cap: int, held: int, detail: str | None = None) -> None:
        super().__init__(
            f"The namespace already holds {held} records of kind {kind}, its cap of {cap}; "
            "one must be deleted, or expire, before another is added."
            if detail is None
            else detail
        )
        self.kind = kind
        self.cap = cap


class TopologyConflict(BootstrapError):
    """A prefill rank whose sizes, page size or KV dtype contradict its deployment's registered topology
    (HTTP 409, ``"code": "topology_conflict"``).

    The misconfigured deployment fails fast, where the engines' own server
    mixed the rank in; raised at once, never retried (asking again gets the
    same answer until the deployment's ranks have all gone).
    """

    status = 409
    code = "topology_conflict"


class HistoryGone(BootstrapError):
    """A watch asked for changes older than the history the server keeps (HTTP 410).

    ``version`` is the namespace's version when the server answered (``-1``
    when the reply did not say): read the listing, then watch from it.
    """

    status = 410

    def __init__(self, detail: str, version: int = -1) -> None:
        super().__init__(detail)
        self.version = version


class LeaseNotFound(NotRegistered):
    """No lease of that id: it expired or was revoked, or never was (HTTP 404 with ``"lease"``)."""

    def __init__(self, lease: str, detail: str | None = None) -> None:
        super().__init__(f"No lease {lease}: it expired or was revoked." if detail is None else detail)
        self.lease = lease


class TooManyLeases(BootstrapError):
    """The server already holds as many leases as it allows (``--max-leases``, HTTP 409)."""

    status = 409


class LeasesUnsupported(BootstrapError):
    """The server's store holds no leases yet (HTTP 501): register without ``lease``."""

    status = 501


class PayloadTooLarge(BootstrapError):
    """The request body is over the server's limit (HTTP 413)."""

    status = 413


class UnreadableBody(BadRequest):
    """The body broke its own framing or encoding: the connection cannot carry another request.

    Raised inside the server; a client sees a ``400``.
    """


class RequestTimeout(BootstrapError):
    """The request body did not arrive in time (HTTP 408). Raised inside the server."""

    status = 408


class UnsupportedEncoding(BootstrapError):
    """The body is compressed; registrations are small JSON and are sent plain (HTTP 415).

    Raised inside the server.
    """

    status = 415


class ServerUnavailable(BootstrapError):
    """No answer: the server could not be reached (refused, reset, DNS) or said
    to come back later (503) until the caller's timeout ran out."""

    status = 503


class ShuttingDown(ServerUnavailable):
    """The server is stopping; parked waits are answered with this (HTTP 503)."""

    def __init__(self, detail: str = SHUTTING_DOWN_DETAIL) -> None:
        super().__init__(detail)


class TooManyWaiters(ServerUnavailable):
    """The server holds as many parked waits as it allows (HTTP 503)."""

    def __init__(self, detail: str, retry_after: float = 1.0) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class StoreUnavailable(ServerUnavailable):
    """The store behind the server did not answer (HTTP 503 with ``Retry-After``).

    The server cannot prove absence or acknowledge a write without its store:
    a get answers this, not a ``404``.
    """

    def __init__(self, detail: str, retry_after: float = 1.0) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class BodyBudgetExhausted(ServerUnavailable):
    """The request bodies being read fill the server's memory budget for them (HTTP 503 with ``Retry-After``).

    Raised inside the server before the body is read; a client sees a ``503``.
    """

    def __init__(self, detail: str, retry_after: float = 1.0) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class TooManyNamespaces(ServerUnavailable):
    """The store already holds records in as many namespaces as it allows (HTTP 503)."""


class StateFileError(ServerUnavailable):
    """The state file cannot be read or written (HTTP 503 when a registration meets it)."""


class UnexpectedReply(BootstrapError):
    """The reply is not one an aiobootstrap (or compatible) server gives.

    A ``404`` that is not "not registered" (a wrong base URL, a proxy's own
    page), a ``200`` whose body is not the expected JSON, a ``5xx`` other than
    ``503``. ``status`` is the reply's HTTP status. Never retried: asking
    again would get the same answer.
    """


class AddressInUse(BootstrapError, OSError):
    """The port is held by another process.

    ``holder`` says, where it could be found out, which process that is and
    whether it is an aiobootstrap server.
    """

    def __init__(self, host: str, port: int, holder: str = "", remedy: str = "pick another port") -> None:
        held = f"another process already holds port {port}" + (f" ({holder})" if holder else "")
        super().__init__(f"Cannot listen on {host_port(host, port)}: {held}; {remedy}.")
        self.remedy = remedy
        self.errno = errno.EADDRINUSE
        self.host = host
        self.port = port
        self.holder = holder


class RankNotRegistered(NotRegistered, TimeoutError):
    """The server answered "not registered" until the caller's timeout ran out.

    ``ranks`` lists every rank still missing; ``rank`` is the first of them.
    ``noun`` names the kind of record that was missing (``transfer engine
    info``, ``parallelism config``), as the sentence does.
    """

    def __init__(self, ranks: Iterable[int], detail: str | None = None, *, noun: str | None = None) -> None:
        self.ranks: Sequence[int] = tuple(ranks)
        self.rank = self.ranks[0] if self.ranks else -1
        self.noun = ENGINE_INFO_NOUN if noun is None else noun
        super().__init__(missing_ranks_detail(self.ranks, self.noun) if detail is None else detail)


_BY_STATUS: dict[int, type[BootstrapError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: UnexpectedReply,  # a rank's 404 is told apart by the protocol module first
    409: TooManyRanks,
    410: HistoryGone,
    413: PayloadTooLarge,
    501: LeasesUnsupported,
    503: ServerUnavailable,
}


_BY_CODE: dict[str, type[BootstrapError]] = {
    cls.code: cls for cls in (TopologyConflict,) if cls.code is not None
}
"""The errors a status alone does not name, by their ``code``."""


def error_for_status(status: int, detail: str, code: str | None = None) -> BootstrapError:
    """The error a client raises for an error reply with this status (and ``code``, when it has one)."""
    cls = _BY_CODE.get(code) if code is not None else None
    if cls is None or cls.status != status:
        cls = _BY_STATUS.get(status)
    if cls is None:
        cls = BadRequest if 400 <= status < 500 else UnexpectedReply
    error = cls(detail)
    error.status = status
    return error
