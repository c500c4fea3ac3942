"""The public error tree, shared by the server and the client.

Every error a caller can see derives from :class:`BootstrapError`. Each class
that maps to an HTTP reply carries its status in ``status``: the server turns
a raised error into ``{"detail": ...}`` with that status, and the client turns
a reply with that status back into the same class (see ``error_for_status``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "BadRequest",
    "BootstrapError",
    "NotRegistered",
    "PayloadTooLarge",
    "RankNotRegistered",
    "ServerUnavailable",
    "ShuttingDown",
    "StoreUnavailable",
    "TooManyNamespaces",
    "TooManyRanks",
    "TooManyWaiters",
    "Unauthorized",
    "error_for_status",
]


class BootstrapError(Exception):
    """Root of every error aiobootstrap raises."""

    status: int = 500

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class BadRequest(BootstrapError):
    """The request was malformed; the detail says which part (HTTP 400)."""

    status = 400


class Unauthorized(BootstrapError):
    """The bearer token was missing or wrong (HTTP 401)."""

    status = 401


class NotRegistered(BootstrapError):
    """The server has no info for the asked rank(s) (HTTP 404)."""

    status = 404


class TooManyRanks(BootstrapError):
    """The server already stores as many distinct ranks as it allows (HTTP 409).

    Not a 503: waiting does not help until a rank is unregistered or the
    server is given a world size, so the client raises it at once.
    """

    status = 409


class PayloadTooLarge(BootstrapError):
    """The request body is over the server's limit (HTTP 413)."""

    status = 413


class ServerUnavailable(BootstrapError):
    """The server could not be reached or asked us to come back later."""

    status = 503


class ShuttingDown(ServerUnavailable):
    """The server is stopping; parked waits are answered with this (HTTP 503)."""


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


class TooManyNamespaces(ServerUnavailable):
    """The store already holds records in as many namespaces as it allows (HTTP 503)."""


class RankNotRegistered(NotRegistered, TimeoutError):
    """The caller's timeout ran out before the rank(s) registered.

    ``ranks`` lists every rank still missing; ``rank`` is the first of them.
    """

    def __init__(self, ranks: Iterable[int], detail: str | None = None) -> None:
        self.ranks: Sequence[int] = tuple(ranks)
        self.rank = self.ranks[0] if self.ranks else -1
        if detail is None:
            if len(self.ranks) == 1:
                detail = f"No transfer engine info for rank {self.rank}"
            else:
                shown = ", ".join(str(rank) for rank in self.ranks[:20])
                more = f" and {len(self.ranks) - 20} more" if len(self.ranks) > 20 else ""
                detail = f"No transfer engine info for ranks {shown}{more}"
        super().__init__(detail)


_BY_STATUS: dict[int, type[BootstrapError]] = {
    400: BadRequest,
    401: Unauthorized,
    404: NotRegistered,
    409: TooManyRanks,
    413: PayloadTooLarge,
    503: ServerUnavailable,
}


def error_for_status(status: int, detail: str) -> BootstrapError:
    """The error a client raises for an error reply with this status."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = BadRequest if 400 <= status < 500 else BootstrapError
    error = cls(detail)
    error.status = status
    return error
