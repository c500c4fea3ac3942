"""Leases on the wire (SPEC section 9): their routes, bodies and replies, both ways.

``POST /leases {"ttl": S}`` grants one, ``POST /leases/{ID}/keepalive`` renews
it, ``GET /leases/{ID}`` reads it, ``DELETE /leases/{ID}`` revokes it; any
register body may carry ``"lease": ID``. A lease's ``404`` carries
``"lease": ID`` beside its detail, which is how the client tells it from
any other ``404``. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._json import dumps, loads, stdlib_dumps
from .._names import ENCODER_URLS
from ..exceptions import BadRequest, LeaseNotFound, UnexpectedReply
from .errors import reply_object

__all__ = [
    "LEASES_PATH",
    "MAX_TTL",
    "MIN_TTL",
    "LeaseInfo",
    "LeaseRecord",
    "decode_lease",
    "decode_lease_missing",
    "encode_lease",
    "lease_body",
    "lease_keepalive_path",
    "lease_path",
    "parse_lease_field",
    "parse_ttl_body",
    "with_lease",
]

LEASES_PATH = "/leases"
LEASE_ROUTE = "/leases/{lease}"
LEASE_KEEPALIVE_ROUTE = "/leases/{lease}/keepalive"

MIN_TTL = 1.0
MAX_TTL = 86_400.0
"""A lease's TTL, in seconds, is a number from :data:`MIN_TTL` to :data:`MAX_TTL` (a day)."""

_TTL_RULE = f"a number of seconds from {MIN_TTL:g} to {MAX_TTL:g}"


def lease_path(lease: str) -> str:
    return f"{LEASES_PATH}/{lease}"


def lease_keepalive_path(lease: str) -> str:
    return f"{LEASES_PATH}/{lease}/keepalive"


# -- the server's readers -----------------------------------------------


def parse_ttl(ttl: object) -> float:
    """A lease's TTL: ``BadRequest`` unless a number (not a bool) from 1 to 86,400."""
    if ttl is None:
        raise BadRequest(f"The field ttl is missing: send the lease's time to live, {_TTL_RULE}.")
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise BadRequest(f"The field ttl must be {_TTL_RULE}.")
    if not MIN_TTL <= ttl <= MAX_TTL:  # a NaN compares false too
        raise BadRequest(f"The field ttl must be {_TTL_RULE}.")
    return float(ttl)


def parse_ttl_body(payload: Mapping[str, Any]) -> float:
    """The ``ttl`` of a ``POST /leases`` body (already parsed as a JSON object)."""
    return parse_ttl(payload.get("ttl"))


def parse_lease_field(payload: Mapping[str, Any]) -> str | None:
    """The ``lease`` of a register body: a non-empty string, or ``None`` (absent or null: no lease)."""
    lease = payload.get("lease")
    if lease is None:
        return None
    if not isinstance(lease, str) or not lease:
        raise BadRequest("The field lease must be a lease id, the string POST /leases answered.")
    return lease


def _ttl_number(ttl: float) -> float | int:
    return int(ttl) if ttl.is_integer() else ttl


def encode_lease(lease: str, ttl: float, remaining: float | None = None, records: Any = None) -> bytes:
    """A grant's or a keepalive's reply; with ``remaining`` and ``records``, a read's."""
    reply: dict[str, Any] = {"lease": lease, "ttl": _ttl_number(ttl)}
    if remaining is not None:
        reply["remaining"] = round(remaining, 3)
        reply["records"] = records if records is not None else []
    return dumps(reply)


def lease_record(kind: str, role: str, rank: int, url: str | None, name: str | None = None) -> dict[str, Any]:
    """One record of a lease read: as a change of SPEC section 10 names it (a named record, a Mooncake
    key or a prefill rank, by its ``key``)."""
    if kind == ENCODER_URLS and url is not None:
        return {"kind": kind, "url": url}
    if name is not None:
        return {"kind": kind, "key": name}
    return {"kind": kind, "role": role, "rank": rank}


# -- the client's writers and readers -------------------------------------


def lease_body(ttl: float) -> bytes:
    # The stdlib: a NaN is sent as NaN, which the server refuses.
    return stdlib_dumps({"ttl": ttl})


def with_lease(body: bytes, lease: str | None) -> bytes:
    """A register body (a JSON object the client wrote) with ``"lease": ID`` added."""
    if lease is None:
        return body
    payload = loads(body)
    payload["lease"] = lease
    return stdlib_dumps(payload)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """One record a lease holds: ``kind``, ``role`` and ``rank``; for an encoder URL ``url``; for a named
    record (a Mooncake key, a prefill rank) its name, ``key``."""

    kind: str
    role: str | None = None
    rank: int | None = None
    url: str | None = None
    key: str | None = None


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """A lease as the server reads it (``GET /leases/{ID}``): its TTL, time left and records."""

    lease: str
    ttl: float
    remaining: float | None = None
    records: Sequence[LeaseRecord] = ()


def decode_lease(payload: bytes) -> LeaseInfo:
    """A grant's, keepalive's or read's reply; ``UnexpectedReply`` when it is not one."""
    try:
        reply = loads(payload)
        lease, ttl = reply["lease"], reply["ttl"]
        if not isinstance(lease, str) or isinstance(ttl, bool) or not isinstance(ttl, int | float):
            raise TypeError
        remaining = reply.get("remaining")
        records = tuple(
            LeaseRecord(item["kind"], item.get("role"), item.get("rank"), item.get("url"), item.get("key"))
            for item in reply.get("records", ())
        )
    except (ValueError, RecursionError, KeyError, TypeError, AttributeError):
        raise UnexpectedReply("The server's reply is not a lease.") from None
    return LeaseInfo(lease, float(ttl), None if remaining is None else float(remaining), records)


def decode_lease_missing(status: int, payload: bytes) -> LeaseNotFound | None:
    """The :class:`LeaseNotFound` a reply says, or ``None`` when it is no lease's ``404``."""
    reply = reply_object(payload) if status == 404 else None
    lease = None if reply is None else reply.get("lease")
    if reply is None or not isinstance(lease, str):
        return None
    detail = reply.get("detail")
    return LeaseNotFound(lease, detail if isinstance(detail, str) else None)
