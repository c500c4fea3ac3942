"""vLLM's Mooncake connector bootstrap (SPEC section 15), both ways: what a prefill worker registers, what
decode reads back, and the exact sentences vLLM's own server answers with. No I/O here.

vLLM's worker ``POST``s ``/register`` (a JSON object: engine, dp, tp and pp
rank, and the address of its ZMQ side channel) and treats any HTTP error as
fatal; decode ``GET``s ``/query`` once per prefill address and, for every
value of the reply, reads ``engine_id`` and ``worker_addr`` (``int()`` of the
tp and pp keys). The reply here is that shape, key for key, with string keys
as JSON gives them (:func:`query_reply`); :func:`read_query` reads it back.

A malformed ``/register`` body is a ``400`` with one sentence
(:class:`~aiobootstrap.exceptions.BadRequest`), where vLLM's FastAPI answers
``422`` with a list: the worker stops on either, and logs the sentence. A
registration's lease travels in :data:`LEASE_HEADER` (the body is vLLM's), as
a Mooncake ``PUT``'s does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._json import loads
from ..exceptions import BadRequest
from .metadata import LEASE_HEADER

__all__ = [
    "FIELDS",
    "LEASE_HEADER",
    "MAX_SIZE",
    "MAX_TEXT",
    "NOT_COMPLETE",
    "QUERY_PATH",
    "READY_PARAMS",
    "REGISTER_OK",
    "REGISTER_PATH",
    "VLLM_CLAIM",
    "VLLM_LISTING_PATH",
    "VLLM_WORKER",
    "Engine",
    "Readiness",
    "Worker",
    "claim_name",
    "mismatch_detail",
    "moved_detail",
    "parse_readiness",
    "parse_register",
    "query_reply",
    "ranks_of_name",
    "read_query",
]

REGISTER_PATH = "/register"
QUERY_PATH = "/query"
VLLM_LISTING_PATH = "/vllm"
"""aiobootstrap's own: the namespace's vLLM workers with what the probes found (the page, ``status``)."""

VLLM_WORKER = "vllm_worker"
"""The record kind of a worker's registration (named by :attr:`Worker.name`: ``dp0-tp1-pp0``)."""
VLLM_CLAIM = "vllm_claim"
"""The record kind of a dp rank's engine claim (named by the dp rank: ``dp0``), written compare-and-set."""

REGISTER_OK: dict[str, Any] = {"status": "ok"}
"""``POST /register``'s ``200`` body, as vLLM's server sends it."""
NOT_COMPLETE = "The vLLM deployment is not complete: "
"""The start of ``/query``'s ``503`` when a readiness wait (``wait=&tp_size=``) ends first; what is missing
follows. The client reads a deployment not complete by it, as it reads "not registered"."""

FIELDS = ("engine_id", "dp_rank", "tp_rank", "pp_rank", "addr")
"""What a ``/register`` body must hold; any other field is accepted and ignored (vLLM's model does so)."""
_RANKS = ("dp_rank", "tp_rank", "pp_rank")
MAX_TEXT = 1024
"""The longest ``engine_id`` or ``addr`` taken (vLLM's are a uuid and ``tcp://host:port``)."""
MAX_RANK = 1 << 20
"""The largest rank taken: far past any deployment, small enough that a record's name stays short."""

READY_PARAMS = ("tp_size", "pp_size", "dp_size")
MAX_SIZE = 9_999_999
"""The largest size ``/query`` takes (seven digits)."""
"""``GET /query``'s readiness parameters (aiobootstrap's own; with ``wait=``)."""


def mismatch_detail(dp_rank: int, old: str, new: str) -> str:
    """vLLM's ``400`` sentence for another engine on a held dp rank, word for word."""
    return f"Engine ID mismatch for dp_rank={dp_rank}: expected {old}, got {new}"


def moved_detail(dp_rank: int, tp_rank: int, pp_rank: int, old: str, new: str) -> str:
    """vLLM's own server's ``400`` for a worker at a new address (aiobootstrap takes the new address instead;
    a client reading vLLM's server recognizes the refusal by it)."""
    return (
        f"Worker with dp_rank={dp_rank}, tp_rank={tp_rank}, pp_rank={pp_rank} is already registered at "
        f"{old}, but still want to register at {new}"
    )


@dataclass(frozen=True, slots=True)
class Worker:
    """One prefill worker's registration: its engine, its three ranks, and its ZMQ side channel's address."""

    engine_id: str
    dp_rank: int
    tp_rank: int
    pp_rank: int
    addr: str

    @property
    def name(self) -> str:
        """Its record's name, which ``/watch`` shows: ``dp0-tp1-pp0``."""
        return f"dp{self.dp_rank}-tp{self.tp_rank}-pp{self.pp_rank}"

    def says(self) -> str:
        return f"dp_rank={self.dp_rank} tp_rank={self.tp_rank} pp_rank={self.pp_rank}"

    def as_value(self) -> dict[str, Any]:
        """The registration as its record keeps it (the body's five fields, nothing else)."""
        return {
            "engine_id": self.engine_id,
            "dp_rank": self.dp_rank,
            "tp_rank": self.tp_rank,
            "pp_rank": self.pp_rank,
            "addr": self.addr,
        }

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> Worker:
        """A record's value back (what :meth:`as_value` wrote); ``BadRequest`` for anything else."""
        return _worker_of(value, "The vLLM worker record")


_NAME = re.compile(r"dp([0-9]{1,7})-tp([0-9]{1,7})-pp([0-9]{1,7})")


def ranks_of_name(name: str) -> tuple[int, int, int] | None:
    """The (dp, tp, pp) ranks a worker record's name says (:attr:`Worker.name`); ``None`` for another name."""
    match = _NAME.fullmatch(name)
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


def claim_name(dp_rank: int) -> str:
    """The name of dp rank ``dp_rank``'s claim record: ``dp0``."""
    return f"dp{dp_rank}"


def parse_register(body: bytes) -> Worker:
    """A ``POST /register`` body as a :class:`Worker`; a :class:`BadRequest` with one sentence otherwise."""
    try:
        data = loads(body)
    except (ValueError, RecursionError):
        raise BadRequest("The /register body is not JSON: send a JSON object with " + _FIELDS_SAID) from None
    return _worker_of(data, "The /register body")


_FIELDS_SAID = "engine_id (a string), dp_rank, tp_rank, pp_rank (integers) and addr (a string)."


def _utf8(text: str) -> bool:
    """Whether ``text`` is text a store can keep (no lone surrogate, which JSON may carry and UTF-8 cannot)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _worker_of(data: Any, what: str) -> Worker:
    if not isinstance(data, Mapping):
        raise BadRequest(f"{what} is not a JSON object: send one with {_FIELDS_SAID}")
    missing = [field for field in FIELDS if field not in data]
    if missing:
        raise BadRequest(f"{what} lacks {', '.join(missing)}: send {_FIELDS_SAID}")
    for field in ("engine_id", "addr"):
        text = data[field]
        if not isinstance(text, str) or not text or len(text) > MAX_TEXT or not _utf8(text):
            raise BadRequest(
                f"{what}'s {field} must be a non-empty UTF-8 string of at most {MAX_TEXT} characters."
            )
    dp, tp, pp = (_rank(data[field], f"{what}'s {field}") for field in _RANKS)
    return Worker(data["engine_id"], dp, tp, pp, data["addr"])


def _rank(value: Any, what: str) -> int:
    """A rank as vLLM's model takes it: an integer, or a number with no fraction (``3.0``), never a bool."""
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int or not 0 <= value <= MAX_RANK:
        raise BadRequest(f"{what} must be an integer from 0 to {MAX_RANK}, not {value!r:.40}.")
    return value


@dataclass(frozen=True, slots=True)
class Engine:
    """One dp rank of ``/query``'s reply: its engine, and its workers' addresses by tp rank, then pp rank."""

    engine_id: str
    worker_addr: dict[int, dict[int, str]]

    @property
    def tp_size(self) -> int:
        """What decode takes for the engine's TP size: ``len(worker_addr)``."""
        return len(self.worker_addr)


def query_reply(workers: Iterable[Worker]) -> dict[str, Any]:
    """``GET /query``'s body: ``{"D": {"engine_id": E, "worker_addr": {"T": {"P": addr}}}}``, string keys in
    numeric order; ``{}`` for no worker. The caller hands one engine's workers per dp rank."""
    by_dp: dict[int, list[Worker]] = {}
    for worker in workers:
        by_dp.setdefault(worker.dp_rank, []).append(worker)
    reply: dict[str, Any] = {}
    for dp in sorted(by_dp):
        ranks = sorted(by_dp[dp], key=lambda w: (w.tp_rank, w.pp_rank))
        addrs: dict[str, dict[str, str]] = {}
        for worker in ranks:
            addrs.setdefault(str(worker.tp_rank), {})[str(worker.pp_rank)] = worker.addr
        reply[str(dp)] = {"engine_id": ranks[0].engine_id, "worker_addr": addrs}
    return reply


def read_query(reply: Any) -> dict[int, Engine]:
    """A ``/query`` reply, read as vLLM's decode reads it (``int()`` of every key); ``ValueError`` when it is
    not that shape."""
    if not isinstance(reply, dict):
        raise ValueError("The /query reply is not a JSON object.")
    engines: dict[int, Engine] = {}
    for dp, entry in reply.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("engine_id"), str):
            raise ValueError(f"The /query reply's dp rank {dp!r:.40} has no engine_id.")
        addrs = entry.get("worker_addr")
        if not isinstance(addrs, dict) or not all(isinstance(pps, dict) for pps in addrs.values()):
            raise ValueError(f"The /query reply's dp rank {dp!r:.40} has no worker_addr object of objects.")
        worker_addr = {int(tp): {int(pp): str(addr) for pp, addr in pps.items()} for tp, pps in addrs.items()}
        engines[int(dp)] = Engine(entry["engine_id"], worker_addr)
    return engines


@dataclass(frozen=True, slots=True)
class Readiness:
    """What ``GET /query?wait=S&tp_size=N[&pp_size=K][&dp_size=M]`` waits for: ``dp_size`` dp ranks (at least
    one) and, with ``tp_size``, each with ``tp_size`` tp ranks of ``pp_size`` pp ranks."""

    tp_size: int | None
    """``None``: the dp ranks are counted, not their workers (``pp_size`` counts only with it)."""
    pp_size: int = 1
    dp_size: int = 1

    @property
    def whole(self) -> int:
        """The workers a dp rank has when it is whole (0: not counted)."""
        return 0 if self.tp_size is None else self.tp_size * self.pp_size

    def missing(self, workers: Iterable[Worker]) -> str | None:
        """What keeps ``workers`` (one engine's per dp rank) from being ready, in one sentence; ``None`` when
        they are."""
        held: dict[int, set[tuple[int, int]]] = {}
        for worker in workers:
            held.setdefault(worker.dp_rank, set()).add((worker.tp_rank, worker.pp_rank))
        each = "" if self.tp_size is None else f" (each of tp_size={self.tp_size}, pp_size={self.pp_size})"
        if len(held) < self.dp_size:
            return (
                f"{len(held)} of {self.dp_size} dp rank{'s' if self.dp_size != 1 else ''} registered{each}."
            )
        for dp in sorted(held):
            short = [
                f"tp_rank={tp} pp_rank={pp}"
                for tp in range(self.tp_size or 0)
                for pp in range(self.pp_size)
                if (tp, pp) not in held[dp]
            ]
            if short:
                more = f" and {len(short) - 3} more" if len(short) > 3 else ""
                return f"dp_rank={dp} lacks {', '.join(short[:3])}{more}."
        return None


def parse_readiness(query: Mapping[str, str]) -> Readiness | None:
    """``/query``'s ``tp_size``, ``pp_size`` and ``dp_size`` as a :class:`Readiness`; ``None`` without any; a
    :class:`BadRequest` naming the parameter otherwise."""
    sizes: dict[str, int] = {}
    for name in READY_PARAMS:
        text = query.get(name)
        if text is None:
            continue
        if not (text.isascii() and text.isdecimal()) or not 1 <= int(text) <= MAX_SIZE:
            raise BadRequest(f"{name} must be an integer from 1 to {MAX_SIZE}, not {text!r:.40}.")
        sizes[name] = int(text)
    if not sizes:
        return None
    return Readiness(sizes.get("tp_size"), sizes.get("pp_size", 1), sizes.get("dp_size", 1))
