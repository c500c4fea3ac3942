"""Error replies, both ways: the ``{"detail": ...}`` body, and "not registered" told from any other 404.

The sentence of a missing rank is the error tree's
(:func:`~aiobootstrap.exceptions.missing_ranks_detail`); this module writes it
into a reply with the missing ranks beside it, and reads it back. An error's
other fields are written here too (:func:`error_fields`: a lease's ``404`` its
``lease``, an error a status alone does not name its ``code``), and read back
(:func:`decode_error`), so the client raises the class the server raised.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .._json import dumps, loads
from .._ranks import RankSet, is_rank, rank_value
from ..exceptions import (
    ENGINE_INFO_NOUN,
    BootstrapError,
    LeaseNotFound,
    error_for_status,
    missing_ranks_detail,
)
from .routes import MAX_BATCH_RANKS, MISSING_LIST_MAX

_NOT_REGISTERED_OLD = re.compile(r"No transfer engine info for rank ([0-9]{1,18})")
"""SPEC section 1's sentence: all an old polling server's 404 says."""


def reply_object(payload: bytes) -> dict[str, Any] | None:
    """An error reply's JSON object, or ``None`` when it is not one (a proxy's page, plain text)."""
    try:
        reply = loads(payload)
    except (ValueError, RecursionError):
        return None
    return reply if isinstance(reply, dict) else None


def error_body(detail: str, **extra: Any) -> bytes:
    return dumps({"detail": detail, **extra})


def error_fields(error: BootstrapError) -> dict[str, Any]:
    """What ``error``'s reply carries beside its detail: a lease's ``404`` its ``lease`` (told from a rank's
    ``404`` by it), and an error its status alone does not name its ``code`` (``"topology_conflict"``)."""
    fields: dict[str, Any] = {}
    if isinstance(error, LeaseNotFound):
        fields["lease"] = error.lease
    if error.code is not None:
        fields["code"] = error.code
    return fields


def decode_error(status: int, payload: bytes) -> BootstrapError:
    """The error an error reply means: the class of its ``code`` (:func:`error_fields`), else of its status."""
    reply = reply_object(payload)
    code = None if reply is None else reply.get("code")
    return error_for_status(status, error_detail(status, payload), code if isinstance(code, str) else None)


def encode_not_registered(missing: Sequence[int] | RankSet, noun: str = ENGINE_INFO_NOUN) -> bytes:
    """The 404 of a get or a delete (its rank in ``missing``), or of a batch get (``missing`` a :class:`RankSet`).

    A batch's reply stays small whatever the set: ``missing`` lists at most
    :data:`MISSING_LIST_MAX` ranks (the smallest; ``"missing_truncated": true``
    says there are more), and ``missing_ranks`` holds them all as a spec.
    """
    detail = missing_ranks_detail(missing, noun)
    if not isinstance(missing, RankSet):
        return error_body(detail, missing=list(missing))
    return error_body(detail, **missing_fields(missing))


def missing_fields(missing: RankSet) -> dict[str, Any]:
    """``missing`` (at most :data:`MISSING_LIST_MAX` ranks, the smallest), ``"missing_truncated": true``
    when there are more, and ``missing_ranks`` (all of them, as a spec): a few KB whatever the set."""
    listed = missing.head(MISSING_LIST_MAX)
    fields: dict[str, Any] = {"missing": listed}
    if len(missing) > len(listed):
        fields["missing_truncated"] = True
    fields["missing_ranks"] = str(missing)
    return fields


def decode_not_registered(status: int, payload: bytes) -> list[int] | None:
    """The ranks a reply says are not registered; ``None`` when it is not such a reply.

    The one place the client tells "not registered" from any other 404 (a
    wrong base URL, a proxy's page): by ``missing_ranks`` (a batch's, every
    rank missing) or ``missing``, or, from an old polling server, by SPEC
    section 1's exact sentence.
    """
    reply = reply_object(payload) if status == 404 else None
    if reply is None:
        return None
    spec = reply.get("missing_ranks")
    if isinstance(spec, str) and spec:
        try:
            return list(RankSet.parse(spec, limit=MAX_BATCH_RANKS))
        except ValueError:
            pass
    missing = reply.get("missing")
    if isinstance(missing, list) and missing and all(is_rank(rank) for rank in missing):
        return missing
    detail = reply.get("detail")
    match = _NOT_REGISTERED_OLD.fullmatch(detail) if isinstance(detail, str) else None
    return None if match is None else [int(match.group(1))]


def error_detail(status: int, payload: bytes) -> str:
    """The ``detail`` of an error reply, its text when it is one short line of text (the engines' servers
    answer so: "Prefill server not fully registered yet (3 workers registered)."), else a sentence naming
    its status."""
    try:
        reply = loads(payload)
    except (ValueError, RecursionError):
        reply = None
    detail = reply.get("detail") if isinstance(reply, dict) else None
    if isinstance(detail, str) and detail:
        return detail
    if reply is None and 0 < len(payload) <= _TEXT_DETAIL:
        text = payload.decode(errors="replace").strip()
        if text and text.isprintable():
            return text
    return f"The server answered HTTP {status} without a detail."


_TEXT_DETAIL = 256
"""The longest plain-text reply taken as an error's detail (a page of HTML or a traceback is not one)."""


def decode_absent(status: int, payload: bytes, noun: str) -> list[int] | None:
    """The ranks a reply says have no record of the kind named ``noun``; ``None`` if it is not such a reply.

    :func:`decode_not_registered`, and for a kind other than transfer-engine
    info an old server's sentence of that kind (``No parallelism config for rank N``).
    """
    missing = decode_not_registered(status, payload)
    if missing is not None or status != 404 or noun == ENGINE_INFO_NOUN:
        return missing
    try:
        reply = loads(payload)
    except (ValueError, RecursionError):
        return None
    detail = reply.get("detail") if isinstance(reply, dict) else None
    prefix = f"No {noun} for rank "
    if isinstance(detail, str) and detail.startswith(prefix):
        rank = rank_value(detail.removeprefix(prefix))
        return None if rank is None else [rank]
    return None
