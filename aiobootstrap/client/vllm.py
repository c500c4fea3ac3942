"""The client's calls of vLLM's Mooncake connector bootstrap (``server/faces/vllm``): register a prefill worker's
side channel, and read or wait for the deployment's workers as decode does.

Each is a function of the transport that :class:`BootstrapClient` makes one of
its methods. vLLM's prefill worker ``POST``s ``/register`` once and decode
``GET``s ``/query`` once; these calls do what those do, and what vLLM's own
server cannot: a registration is retried like :meth:`register`, sent again to
a restarted server (``reregister=True``) and held on a lease; a read may wait
for a complete deployment (``tp_size=``, the readiness vLLM's decode lacks) or
for a change after a version (``after=``). A wait that runs out before the
deployment is complete raises :class:`ServerUnavailable` with the server's
sentence (``dp_rank=0 lacks tp_rank=3 pp_rank=0.``); another engine on a held
dp rank raises :class:`BadRequest` with vLLM's (``Engine ID mismatch for
dp_rank=0: expected A, got B``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._json import dumps, loads
from ..exceptions import RankNotRegistered, ServerUnavailable, UnexpectedReply
from ..wire.results import decode_version_header
from ..wire.vllm import (
    LEASE_HEADER,
    NOT_COMPLETE,
    QUERY_PATH,
    REGISTER_PATH,
    VLLM_LISTING_PATH,
    Engine,
    Worker,
    read_query,
)
from . import calls
from .leases import ClientLease, send_registration
from .restarts import Replay
from .retry import Deadline
from .transport import Reply, Transport

__all__ = ["VllmWorkers", "query_vllm_workers", "register_vllm_worker", "vllm_status", "wait_vllm_workers"]


async def register_vllm_worker(
    transport: Transport,
    engine_id: str,
    dp_rank: int,
    tp_rank: int,
    pp_rank: int,
    addr: str,
    *,
    timeout: float | None = 60.0,
    lease: ClientLease | None = None,
) -> None:
    """Register a vLLM prefill worker: its engine, its three ranks and ``addr``, its ZMQ side channel
    (``tcp://host:port``), the body vLLM's ``register_worker_with_bootstrap`` sends.

    The same worker at a new address replaces the old one (a restarted worker comes back); another engine
    on a dp rank whose engine still answers raises :class:`BadRequest` with vLLM's mismatch sentence.
    ``lease`` (from ``client.lease``): the worker leaves with it (``X-Aiobootstrap-Lease``), and is
    registered again if the lease is found gone and granted again. Retried like ``register``, and sent
    again to a restarted server with ``reregister=True``.
    """
    for name, text in (("engine_id", engine_id), ("addr", addr)):
        if not isinstance(text, str):
            raise TypeError(f"A vLLM worker's {name} is a str, not {text!r:.60}.")
    worker = Worker(
        engine_id,
        _integer("dp_rank", dp_rank),
        _integer("tp_rank", tp_rank),
        _integer("pp_rank", pp_rank),
        addr,
    )
    replay = Replay("POST", REGISTER_PATH, dumps(worker.as_value()), lease_header=LEASE_HEADER)
    await send_registration(transport, (REGISTER_PATH, worker.name), replay, timeout, lease)


async def query_vllm_workers(transport: Transport, *, timeout: float | None = 60.0) -> VllmWorkers:
    """The workers registered now, as vLLM's decode reads ``GET /query`` (no waiting; retrying an unreachable
    server up to ``timeout``): each dp rank's engine and its workers' addresses, with the version."""
    reply = await calls.request(transport, "GET", QUERY_PATH, Deadline(timeout))
    return _workers(reply)


async def wait_vllm_workers(
    transport: Transport,
    *,
    tp_size: int | None = None,
    pp_size: int | None = None,
    dp_size: int | None = None,
    after: int = 0,
    timeout: float | None = 60.0,
) -> VllmWorkers:
    """The workers once the deployment is complete, waiting up to ``timeout`` seconds (``GET
    /query?wait=&tp_size=``): at least ``dp_size`` dp ranks (1 when not given), each with ``tp_size`` tp
    ranks of ``pp_size`` pp ranks (1 when not given); ``dp_size`` alone counts the dp ranks, not their
    workers. At the deadline, :class:`RankNotRegistered` (a ``NotRegistered``, also a ``TimeoutError``) with
    the server's sentence naming what is missing; :class:`ServerUnavailable` when the server did not answer.

    ``after=V`` also waits for a change after version ``V`` (the ``version`` of an earlier answer): when
    the time runs out with no change, the workers as they are (their ``version`` equal to ``after``), as
    :meth:`wait_encoder_urls` answers. A version below ``after`` (a restarted in-memory server) is a change.
    With no size, only ``after`` is waited for.
    """
    if pp_size is not None and tp_size is None:
        raise ValueError(
            "pp_size needs tp_size: a dp rank is whole with tp_size tp ranks of pp_size pp ranks"
        )
    given = {"tp_size": tp_size, "pp_size": pp_size, "dp_size": dp_size}
    sizes = {name: str(_integer(name, size)) for name, size in given.items() if size is not None}
    _integer("after", after)

    def query(wait: float) -> Mapping[str, str]:
        return {**sizes, "after": str(after), "wait": f"{wait:g}"}

    try:
        reply = await transport.long_poll(QUERY_PATH, query, Deadline(timeout), _answered(transport, after))
    except ServerUnavailable as exc:
        if type(exc) is not ServerUnavailable or not exc.detail.startswith(NOT_COMPLETE):
            raise  # no answer, or a server that is stopping or full: not the deployment's incompleteness
        raise RankNotRegistered((), exc.detail, noun="vLLM worker") from None
    return _workers(reply)


async def vllm_status(transport: Transport, *, timeout: float | None = 60.0) -> dict[str, Any]:
    """The namespace's vLLM workers as ``GET /vllm`` lists them, with what the server's probes found."""
    reply = await calls.request(transport, "GET", VLLM_LISTING_PATH, Deadline(timeout))
    status: dict[str, Any] = json.loads(reply.body)
    return status


@dataclass(frozen=True, slots=True)
class VllmWorkers:
    """A ``/query`` answer: :attr:`engines` by dp rank, as vLLM's decode reads them, and its :attr:`version`."""

    engines: dict[int, Engine]
    """Each dp rank's engine: its ``engine_id`` and ``worker_addr`` (tp rank, then pp rank, to address);
    ``tp_size`` is what vLLM's decode takes for the engine's TP size."""
    version: int
    """The namespace's version when it was read; ``after=`` this to wait for the next change."""


def _integer(name: str, value: object) -> int:
    """``value`` if it is an ``int``; a ``TypeError`` naming ``name`` before any request otherwise (the server
    checks the range: a ``BadRequest``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} is an int, not {value!r:.60}.")
    return value


def _answered(transport: Transport, after: int) -> Callable[[str, Reply], bool]:
    """A ``200`` ends the wait once its version is not ``after`` (or at once for ``after=0``); a ``503`` (not
    complete at the server's deadline) is the transport's to ask again; anything else raises."""

    def answered(path: str, reply: Reply) -> bool:
        if reply.status != 200:
            raise transport.error(reply.status, path, reply.body)
        return after == 0 or decode_version_header(reply.version) != after

    return answered


def _workers(reply: Reply) -> VllmWorkers:
    """A ``/query`` reply read as decode reads it; :class:`UnexpectedReply` when it is not that shape."""
    try:
        engines = read_query(loads(reply.body))
    except (ValueError, RecursionError) as exc:
        raise UnexpectedReply(f"The server's /query reply is not vLLM's: {exc}") from None
    return VllmWorkers(engines, decode_version_header(reply.version))
