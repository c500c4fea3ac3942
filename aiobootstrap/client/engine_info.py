"""The client's calls of the engine-info face (``server/faces/engine_info``): each rank's transfer-engine info
and parallelism config, registered, removed and waited for, one rank or a batch.

Each is a function of the transport that :class:`BootstrapClient` makes one of
its methods (its name, signature and docstring); both kinds take the one
per-rank path in ``calls``, given the kind's routes from ``wire.kinds``. A role
is a query parameter or a body field, left out for the default ``target`` so
that such requests are the classic ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from .._names import DEFAULT_ROLE
from ..wire.bodies import config_body, engine_info_body
from ..wire.kinds import PARALLELISM_CONFIG_ROUTES, TRANSFER_ENGINE_INFO_ROUTES
from ..wire.params import record_query, records_query
from ..wire.results import (
    ParallelismConfig,
    TransferEngineInfo,
    decode_batch,
    decode_config,
    decode_config_batch,
    decode_info,
)
from . import calls
from .leases import ClientLease
from .retry import Deadline
from .transport import Transport

__all__ = [
    "get",
    "get_many",
    "get_parallelism_config",
    "get_parallelism_configs",
    "register",
    "register_parallelism_config",
    "unregister",
    "unregister_parallelism_config",
]

_INFO = TRANSFER_ENGINE_INFO_ROUTES
_CONFIG = PARALLELISM_CONFIG_ROUTES
"""The per-rank kinds, from the wire's kind table: their routes and the noun of their 404s."""


async def register(
    transport: Transport,
    rank: int,
    *,
    session_id: str | None = None,
    weights_info_dict: Mapping[str, Any],
    fields: Mapping[str, Any] | None = None,
    role: str = DEFAULT_ROLE,
    timeout: float | None = 60.0,
    lease: ClientLease | None = None,
) -> None:
    """Publish ``rank``'s transfer-engine info, replacing any earlier registration of it.

    ``fields`` are more fields of the info, sent as given: a backend-tagged
    registration (``{"backend": "nixl", "agent_name": ..., "agent_metadata":
    ...}``, with no ``session_id``) or anything else the readers want; a
    getter finds them all in :attr:`TransferEngineInfo.fields`. ``role``
    keeps a draft model's records apart from its target's.

    While the server is not up, retries with backoff for up to ``timeout``
    seconds (``None``: for ever), then raises :class:`ServerUnavailable`.
    ``lease`` (from :meth:`lease`) puts the record on it: it lives while the lease does.
    """
    body = engine_info_body(rank, session_id, weights_info_dict, fields, role)
    await calls.register(transport, _INFO, rank, role, body, timeout, lease)


async def unregister(
    transport: Transport, rank: int, *, role: str = DEFAULT_ROLE, timeout: float | None = 60.0
) -> bool:
    """Remove ``rank``'s info; waiters for it go on waiting for a new registration.

    Returns ``False`` when the server had no info for ``rank`` (nothing
    to remove), ``True`` when it removed some.
    """
    return await calls.unregister(transport, _INFO, rank, role, timeout)


async def get(
    transport: Transport,
    rank: int,
    *,
    timeout: float | None = None,
    after: int = 0,
    role: str = DEFAULT_ROLE,
    whole: bool = False,
) -> TransferEngineInfo:
    """``rank``'s info, waiting up to ``timeout`` seconds for it to register.

    ``timeout=None`` waits for ever; ``0`` asks once. ``after=V`` waits
    for a registration newer than version ``V``. ``whole=True`` asks for
    the registration whole (``form=object``), so that ``fields`` holds
    every field even of classic info (a tagged backend's info always
    comes whole). Raises :class:`RankNotRegistered` when the server said
    "not registered" until the time ran out, :class:`ServerUnavailable`
    when it did not answer.
    """
    query = partial(record_query, rank, after, role=role, whole=whole)
    reply = await calls.get_record(transport, _INFO, rank, query, Deadline(timeout))
    return decode_info(reply.body, rank, role)


async def get_many(
    transport: Transport,
    ranks: Iterable[int],
    *,
    timeout: float | None = None,
    after: int = 0,
    role: str = DEFAULT_ROLE,
    whole: bool = False,
) -> dict[int, TransferEngineInfo]:
    """Every rank's info, in one batch request per few thousand ranks.

    Waits like :meth:`get`; on timeout raises :class:`RankNotRegistered`
    naming every rank still missing.
    """

    def query(spec: str, wait: float) -> dict[str, str]:
        return records_query(spec, after, wait, role=role, whole=whole)

    replies = await calls.get_records(transport, _INFO, ranks, query, Deadline(timeout))
    infos: dict[int, TransferEngineInfo] = {}
    for asked, reply in replies:
        infos.update(decode_batch(reply.body, asked, role))
    return infos


async def register_parallelism_config(
    transport: Transport,
    rank: int,
    config: Mapping[str, Any],
    *,
    role: str = DEFAULT_ROLE,
    timeout: float | None = 60.0,
    lease: ClientLease | None = None,
) -> None:
    """Publish ``rank``'s parallelism config (any JSON object, kept and served exactly as given).

    Retries an unreachable server like :meth:`register`; ``lease`` puts it on a lease.
    """
    body = config_body(rank, config, role)
    await calls.register(transport, _CONFIG, rank, role, body, timeout, lease)


async def unregister_parallelism_config(
    transport: Transport, rank: int, *, role: str = DEFAULT_ROLE, timeout: float | None = 60.0
) -> bool:
    """Remove ``rank``'s parallelism config; whether there was one."""
    return await calls.unregister(transport, _CONFIG, rank, role, timeout)


async def get_parallelism_config(
    transport: Transport, rank: int, *, timeout: float | None = None, after: int = 0, role: str = DEFAULT_ROLE
) -> ParallelismConfig:
    """``rank``'s parallelism config, waiting up to ``timeout`` seconds for it, as :meth:`get` waits.

    Raises :class:`RankNotRegistered` ("No parallelism config for rank N")
    when the time runs out first.
    """
    query = partial(record_query, rank, after, role=role)
    reply = await calls.get_record(transport, _CONFIG, rank, query, Deadline(timeout))
    return decode_config(reply.body, rank, reply.version, role)


async def get_parallelism_configs(
    transport: Transport,
    ranks: Iterable[int],
    *,
    timeout: float | None = None,
    after: int = 0,
    role: str = DEFAULT_ROLE,
) -> dict[int, ParallelismConfig]:
    """Every rank's parallelism config, in batch requests, waiting as :meth:`get_many` does."""

    def query(spec: str, wait: float) -> dict[str, str]:
        return records_query(spec, after, wait, role=role)

    replies = await calls.get_records(transport, _CONFIG, ranks, query, Deadline(timeout))
    configs: dict[int, ParallelismConfig] = {}
    for asked, reply in replies:
        configs.update(decode_config_batch(reply.body, asked, role))
    return configs
