"""Query parameters, both ways: the server's parsers and the client's query builders.

Each builder writes exactly what the matching parser reads. A malformed value
raises :class:`~aiobootstrap.exceptions.BadRequest` naming the parameter.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from .._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from .._ranks import RankSet, parse_int, rank_value
from ..exceptions import BadRequest
from .routes import BATCH_QUERY_CHARS, MAX_BATCH_RANKS


def parse_rank_param(value: str | None) -> int:
    if value is None:
        raise BadRequest("Missing rank parameter")
    rank = rank_value(value)
    if rank is None:
        raise BadRequest("Invalid rank parameter")
    return rank


# What float() takes, less its leniency (1_0, spaces, other scripts' digits, a
# sign): the same plain ASCII the integer parameters ask for.
_DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_seconds(text: str) -> float | None:
    """``text`` as a finite, non-negative decimal number of seconds; ``None`` if it is not one.

    The one reader of seconds: the ``wait=`` parameter and the tools' options.
    """
    seconds = float(text) if _DECIMAL.fullmatch(text) else math.nan
    return seconds if math.isfinite(seconds) else None


def parse_wait(value: str | None) -> float:
    """Seconds to wait: a finite, non-negative decimal number; absent means 0."""
    if value is None:
        return 0.0
    seconds = parse_seconds(value)
    if seconds is None:
        raise BadRequest("Invalid wait parameter: give a non-negative number of seconds.")
    return seconds


def parse_after(value: str | None) -> int:
    if value is None:
        return 0
    after = parse_int(value)
    if after is None or after < 0:
        raise BadRequest("Invalid after parameter: give a non-negative integer version.")
    return after


def parse_waits(value: str) -> int:
    """A watch's ``waits``: the count of parked waits' moves that a reader saw last."""
    return _count(value, "waits")


def parse_findings(value: str) -> int:
    """A watch's ``findings``: the count of the encoder probes' changed findings that a reader saw last."""
    return _count(value, "findings")


def _count(value: str, name: str) -> int:
    count = parse_int(value)
    if count is None or count < 0:
        raise BadRequest(f"Invalid {name} parameter: give the non-negative integer a reply said.")
    return count


def parse_ranks(spec: str | None) -> RankSet:
    """Parse a rank set such as ``0-3,8,10-11``, kept as ranges: at most :data:`MAX_BATCH_RANKS` ranks."""
    if spec is None or not spec.strip():
        raise BadRequest("Missing ranks parameter: give ranks such as 0-7 or 0,2,5-9.")
    try:
        return RankSet.parse(spec, limit=MAX_BATCH_RANKS)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def format_ranks(ranks: Iterable[int]) -> str:
    """The inverse of :func:`parse_ranks`: ``[0, 1, 2, 5]`` becomes ``0-2,5``."""
    return str(ranks if isinstance(ranks, RankSet) else RankSet.from_ranks(ranks))


def split_rank_specs(ranks: Iterable[int]) -> list[str]:
    """``ranks`` as rank specs, each one request's worth: at most :data:`MAX_BATCH_RANKS` ranks,
    and short enough (``BATCH_QUERY_CHARS``) for one request's query."""
    rank_set = ranks if isinstance(ranks, RankSet) else RankSet.from_ranks(ranks)
    specs: list[str] = []
    for chunk in rank_set.chunks(MAX_BATCH_RANKS):
        parts: list[str] = []
        length = 0
        for part in str(chunk).split(","):
            if parts and length + len(part) > BATCH_QUERY_CHARS:
                specs.append(",".join(parts))
                parts, length = [], 0
            parts.append(part)
            length += len(part) + 1
        specs.append(",".join(parts))
    return specs


def get_query(rank: int, after: int, wait: float) -> dict[str, str]:
    """The query of a get: what ``parse_rank_param``, ``parse_after`` and ``parse_wait`` read."""
    return {"rank": str(rank), "after": str(after), "wait": f"{wait:.3f}"}


def batch_query(spec: str, after: int, wait: float) -> dict[str, str]:
    """The query of a batch get, ``spec`` one of ``split_rank_specs``."""
    return {"ranks": spec, "after": str(after), "wait": f"{wait:.3f}"}


def rank_query(rank: int) -> dict[str, str]:
    """The query of a delete."""
    return {"rank": str(rank)}


FORMS = ("list", "object")
"""What ``form=`` may ask: ``object`` serves a registration whole; ``list`` (the default) the classic shape."""


def parse_form(value: str | None) -> bool:
    """Whether ``form=object`` was asked."""
    if value is None or value == "list":
        return False
    if value == "object":
        return True
    raise BadRequest("Invalid form parameter: give object (the registration whole) or list (the default).")


def with_role(query: dict[str, str], role: str) -> dict[str, str]:
    """``query`` naming ``role``; the default role goes unsaid, so such a request is the classic one."""
    if role != DEFAULT_ROLE:
        query["role"] = role
    return query


def record_query(rank: int, after: int, wait: float, *, role: str, whole: bool = False) -> dict[str, str]:
    """The query of a get of any per-rank kind; ``whole`` asks ``form=object``."""
    query = with_role(get_query(rank, after, wait), role)
    if whole:
        query["form"] = "object"
    return query


def records_query(spec: str, after: int, wait: float, *, role: str, whole: bool = False) -> dict[str, str]:
    """The query of a batch get of any per-rank kind."""
    query = with_role(batch_query(spec, after, wait), role)
    if whole:
        query["form"] = "object"
    return query


def role_rank_query(rank: int, role: str) -> dict[str, str]:
    """The query of a delete of any per-rank kind."""
    return with_role(rank_query(rank), role)


def encoder_list_query(after: int, wait: float) -> dict[str, str]:
    """The query of ``GET /list_encoder_urls``: what ``parse_after`` and ``parse_wait`` read."""
    return {"after": str(after), "wait": f"{wait:.3f}"}


def listing_query(kind: str, role: str) -> dict[str, str]:
    """The query of ``GET /ranks`` for one kind and role (transfer-engine info, target: none)."""
    query = {} if kind == TRANSFER_ENGINE_INFO else {"kind": kind}
    return with_role(query, role)
