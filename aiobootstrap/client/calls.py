"""The one request path under every face's calls: a request that does not park, and a per-rank kind's
register, unregister, get and batch get.

Every per-rank kind (transfer-engine info, parallelism config) is registered,
removed and read the same way, given the kind's entry in the wire's kind
table (``wire.kinds``) for its routes and the noun of its ``404``:
:func:`register`, :func:`unregister`, :func:`get_record` and
:func:`get_records`. A get waits on while the server says "not registered"
and raises :class:`RankNotRegistered` when the time runs out; any other
reply but a ``200`` is the transport's error for it (:meth:`Transport.error`,
which reads the error's class from the reply).

A face's calls (``engine_info``, ``encoders``, ``prefill``, ``metadata``,
``native``) build each request's body or query and decode the reply; sending
it (replicas, backoff, the long-poll, restarts) is the transport's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from functools import partial

from .._ranks import MAX_RANK, RankSet, is_rank
from ..exceptions import RankNotRegistered
from ..wire.errors import decode_absent
from ..wire.kinds import KindRoutes
from ..wire.params import parse_ranks, role_rank_query, split_rank_specs
from .leases import ClientLease, send_registration
from .restarts import Replay
from .retry import Deadline
from .transport import Reply, Transport

__all__ = ["READ_TIMEOUT", "checked_rank", "get_record", "get_records", "register", "request", "unregister"]

READ_TIMEOUT = 60.0
"""How long a request that does not park may take to answer."""


def checked_rank(rank: object) -> int:
    """``rank`` if it is one (an ``int`` from 0 to ``MAX_RANK``); a ``TypeError`` or ``ValueError`` naming it
    otherwise, before any request (``get("0")`` would ask for rank 0 and then refuse its reply as another
    rank's, since the string is not the number)."""
    if isinstance(rank, bool) or not isinstance(rank, int):
        raise TypeError(f"A rank is an int, not {rank!r}.")
    if not is_rank(rank):
        raise ValueError(f"A rank is an integer from 0 to {MAX_RANK}, not {rank}.")
    return rank


async def request(
    transport: Transport,
    method: str,
    path: str,
    deadline: Deadline,
    *,
    params: Mapping[str, str] | None = None,
    body: bytes | None = None,
) -> Reply:
    """The ``200`` of one request that does not park; any other reply raises its error."""
    reply = await transport.call(method, path, deadline, params=params, body=body, read_timeout=READ_TIMEOUT)
    if reply.status != 200:
        raise transport.error(reply.status, path, reply.body)
    return reply


async def register(
    transport: Transport,
    kind: KindRoutes,
    rank: int,
    role: str,
    body: bytes,
    timeout: float | None,
    lease: ClientLease | None = None,
) -> None:
    """Register ``rank``'s record of ``kind`` (``body``, on ``lease``), remembered for a restarted server."""
    checked_rank(rank)
    replay = Replay("PUT", kind.register_path, body)
    await send_registration(transport, (kind.register_path, role, rank), replay, timeout, lease)


async def unregister(
    transport: Transport, kind: KindRoutes, rank: int, role: str, timeout: float | None
) -> bool:
    """Remove ``rank``'s record of ``kind``; whether there was one."""
    checked_rank(rank)
    transport.forget_registration((kind.register_path, role, rank))
    reply = await transport.call(
        "DELETE",
        kind.register_path,
        Deadline(timeout),
        params=role_rank_query(rank, role),
        read_timeout=READ_TIMEOUT,
    )
    if reply.status == 200:
        return True
    if decode_absent(reply.status, reply.body, kind.noun) is not None:
        return False
    raise transport.error(reply.status, kind.register_path, reply.body)


async def get_record(
    transport: Transport,
    kind: KindRoutes,
    rank: int,
    query: Callable[[float], Mapping[str, str]],
    deadline: Deadline,
) -> Reply:
    """The ``200`` of a get of one rank's record of ``kind``, or :class:`RankNotRegistered`."""
    checked_rank(rank)
    reply = await transport.long_poll(kind.get_path, query, deadline, _found(transport, kind))
    if reply.status != 200:
        missing = decode_absent(reply.status, reply.body, kind.noun)
        raise RankNotRegistered(missing or [rank], noun=kind.noun)
    return reply


async def get_records(
    transport: Transport,
    kind: KindRoutes,
    ranks: Iterable[int],
    query: Callable[[str, float], Mapping[str, str]],
    deadline: Deadline,
) -> list[tuple[RankSet, Reply]]:
    """The ``200`` of each batch get of ``ranks``' records of ``kind``, with the ranks it asked for,
    or :class:`RankNotRegistered` naming every rank still missing."""
    wanted = sorted(set(map(checked_rank, ranks)))
    if not wanted:
        return []
    specs = split_rank_specs(wanted)
    asked = [parse_ranks(spec) for spec in specs]
    found = _found(transport, kind)
    replies = await asyncio.gather(
        *(
            transport.long_poll(kind.batch_path, partial(query, spec), deadline, found, ranks=len(spec_ranks))
            for spec, spec_ranks in zip(specs, asked, strict=True)
        )
    )
    missing: list[int] = []
    for spec_ranks, reply in zip(asked, replies, strict=True):
        if reply.status != 200:
            missing.extend(decode_absent(reply.status, reply.body, kind.noun) or spec_ranks)
    if missing:
        raise RankNotRegistered(sorted(missing), noun=kind.noun)
    return list(zip(asked, replies, strict=True))


def _found(transport: Transport, kind: KindRoutes) -> Callable[[str, Reply], bool]:
    """Whether a get's reply ends the wait: a ``200``; "not registered" waits on; anything else raises."""

    def found(path: str, reply: Reply) -> bool:
        if reply.status == 200:
            return True
        if decode_absent(reply.status, reply.body, kind.noun) is None:
            raise transport.error(reply.status, path, reply.body)
        return False

    return found
