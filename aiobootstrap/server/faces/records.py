"""Replies made from records: a get's, a ``form=object`` get's and the listing's.

The wire's shapes (``wire``) written from the store's records; each face's kinds
(``Face.kinds``) name which encoder serves which kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..._json import dumps
from ..._names import DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from ..._ranks import RankSet
from ...store import HeldLease, Record
from ...wire.bodies import is_classic, session_id_of, weights_of
from ...wire.errors import missing_fields
from ...wire.results import missing_in_world


def encode_info(record: Record) -> bytes:
    """The reply to a get of ``record``'s rank: the classic list, or a tagged backend's whole object."""
    value = record.value
    info: Any = [session_id_of(value), weights_of(value)] if is_classic(value) else value
    return dumps(
        {"rank": record.rank, "remote_instance_transfer_engine_info": info, "version": record.version}
    )


def encode_info_object(record: Record) -> bytes:
    """The reply to a get of ``record``'s rank with ``form=object``: the info whole, as registered."""
    return dumps(
        {"rank": record.rank, "remote_instance_transfer_engine_info": record.value, "version": record.version}
    )


def engine_summary(record: Record) -> dict[str, Any]:
    summary: dict[str, Any] = {"session_id": session_id_of(record.value)}
    backend = record.value.get("backend")
    if backend is not None:
        summary["backend"] = backend
    return summary


def encode_listing(
    records: Sequence[Record],
    version: int,
    world_size: int | None,
    waiters: int,
    now: float,
    *,
    kind: str = TRANSFER_ENGINE_INFO,
    role: str = DEFAULT_ROLE,
    summary: Callable[[Record], dict[str, Any]] = engine_summary,
    leases: Sequence[HeldLease | None] | None = None,
    waiters_by_rank: Sequence[tuple[RankSet, int]] = (),
) -> bytes:
    """The reply to ``GET /ranks``: one kind and role's registered ranks (without values), and who is missing.

    ``summary`` is what an item shows of its record besides rank, version and
    times (for transfer-engine info: ``session_id``, and ``backend`` when tagged). ``leases``, one
    per record, adds ``lease`` and ``lease_remaining`` (seconds) to each record on a lease.
    ``waiters_by_rank`` (ranks with as many waits parked, grouped) becomes an object of rank
    specs to counts: ranges, so a batch wait on 65,536 ranks is one entry.
    """
    missing = None if world_size is None else missing_in_world(world_size, (r.rank for r in records))
    listing = {
        "version": version,
        "kind": kind,
        "role": role,
        "world_size": world_size,
        "count": len(records),
        "waiters": waiters,
        "waiters_by_rank": {str(ranks): waits for ranks, waits in waiters_by_rank},
        "ranks": [
            {
                "rank": record.rank,
                **summary(record),
                "version": record.version,
                "registered_at": record.registered_at,
                "age": round(max(0.0, now - record.registered_at), 3),
                **_lease_fields(None if leases is None else leases[index]),
            }
            for index, record in enumerate(records)
        ],
        **({"missing": None, "missing_ranks": None} if missing is None else missing_fields(missing)),
    }
    return dumps(listing)


def _lease_fields(held: HeldLease | None) -> dict[str, Any]:
    if held is None:
        return {}
    lease, remaining, ttl = held
    return {"lease": lease, "lease_remaining": round(remaining, 3), "lease_ttl": ttl}
