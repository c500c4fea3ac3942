"""The wire format, shared by the server and the client.

Everything both ends must agree on lives here and nowhere else: the routes,
the parameter grammar, the JSON shapes and the error texts. Nothing here does
I/O. On the server's side a malformed value raises
:class:`~aiobootstrap.exceptions.BadRequest` with a detail that names the
field; on the client's side a reply that is not what the protocol allows
raises :class:`~aiobootstrap.exceptions.UnexpectedReply`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .exceptions import BadRequest, UnexpectedReply

try:  # optional (the `fast` extra): the same JSON, several times faster; see docs/benchmarks.md
    import orjson
except ImportError:
    orjson = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from .store import Record

__all__ = [
    "BATCH_PATH",
    "DEFAULT_NAMESPACE",
    "GET_PATH",
    "HEALTH_PATH",
    "METRICS_PATH",
    "OPENAPI_PATH",
    "RANKS_PATH",
    "REGISTER_PATH",
    "Registration",
    "TransferEngineInfo",
]

HEALTH_PATH = "/health"
READY_PATH = "/ready"
REGISTER_PATH = "/register_transfer_engine_info"
GET_PATH = "/get_transfer_engine_info"
BATCH_PATH = "/get_transfer_engine_info_batch"
RANKS_PATH = "/ranks"
METRICS_PATH = "/metrics"
OPENAPI_PATH = "/openapi.json"

JSON_TYPE = "application/json"

HEALTH_HEADER = "X-Aiobootstrap"
"""A header on the ``/health`` reply, naming the version: tells an aiobootstrap server from others."""

BOOT_HEADER = "X-Aiobootstrap-Boot"
"""Every reply names the server's boot: a new value means the server restarted (and may be empty)."""

BATCH_QUERY_CHARS = 4000
"""The longest rank spec a client puts in one batch query: well inside an 8 KiB request line."""

MAX_BATCH_RANKS = 1 << 20
"""The most ranks one batch request may name; keeps a typo like ``0-9999999999`` cheap."""


# -- JSON ---------------------------------------------------------------


# Every digit to "0", everything else to " ": a run of 19 digits becomes a
# plain substring search, ten times faster than a regex on a 20 MB body.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_NUMBER = b"0" * 19


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    # 1e400 is JSON, but as a float it is infinity, which a reply can only
    # carry as null (orjson) or the invalid Infinity (stdlib): refuse it.
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is out of range")
    return value


def loads(data: bytes | str) -> Any:
    """Parse strict JSON: ``NaN`` and ``Infinity`` are refused, as RFC 8259 does."""
    # orjson is strict already, but reads integers past 64 bits as floats, and
    # a 19-digit run is the shortest that can be one: leave those to the stdlib,
    # as everything orjson refuses (lone surrogates, a BOM, 1e400).
    if orjson is not None and isinstance(data, bytes) and _LONG_NUMBER not in data.translate(_DIGITS_ONLY):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data, parse_constant=_reject_constant, parse_float=_finite_float)


def dumps(obj: Any) -> bytes:
    if orjson is not None:
        try:
            # A right-sized copy: orjson's bytes keep its working buffer, 4 KB
            # even for a 200-byte reply, and the registry keeps every reply.
            return memoryview(orjson.dumps(obj)).tobytes()
        except TypeError:  # what orjson refuses (lone surrogates, huge ints, int keys): the stdlib's job
            pass
    return stdlib_dumps(obj)


def stdlib_dumps(obj: Any) -> bytes:
    # ensure_ascii keeps any string a client sent (lone surrogates included)
    # encodable, so a reply can never fail to serialise.
    return json.dumps(obj, separators=(",", ":")).encode("ascii")


def error_body(detail: str, **extra: Any) -> bytes:
    return dumps({"detail": detail, **extra})


# -- namespaces ---------------------------------------------------------

DEFAULT_NAMESPACE = "default"
"""The namespace the unprefixed routes address."""
NAMESPACE_PREFIX = "/ns/"

_NAMESPACE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def check_namespace(name: str) -> str:
    """``name`` if it may name a namespace: it must be safe in a path and in a metric label."""
    if not _NAMESPACE_NAME.fullmatch(name):
        raise BadRequest(
            f"Invalid namespace {name[:80]!r}: use 1 to 63 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit."
        )
    return name


def path(route: str, namespace: str = DEFAULT_NAMESPACE) -> str:
    """The path of ``route`` in ``namespace``; the default namespace's routes are unprefixed.

    The server builds its route templates with ``path(route, "{namespace}")``.
    """
    return route if namespace == DEFAULT_NAMESPACE else f"{NAMESPACE_PREFIX}{namespace}{route}"


# -- registration -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Registration:
    """A validated register request."""

    rank: int
    session_id: str
    weights_info_dict: dict[str, Any]


def is_rank(value: object) -> bool:
    # bool is an int subclass, and a JSON true is not a rank.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def parse_registration(body: bytes) -> Registration:
    """Validate a register request body."""
    try:
        payload = loads(body)
    except (ValueError, RecursionError):
        raise BadRequest("The request body is not valid JSON.") from None
    if not isinstance(payload, dict):
        raise BadRequest("The request body must be a JSON object.")
    if "rank" in payload:
        rank = payload["rank"]
    elif "tp_rank" in payload:
        rank = payload["tp_rank"]
    else:
        raise BadRequest("The field rank is missing: send a non-negative integer rank.")
    if not is_rank(rank):
        raise BadRequest("The field rank must be a non-negative integer.")
    info = payload.get("transfer_engine_info")
    if info is None:
        raise BadRequest("The field transfer_engine_info is missing.")
    if not isinstance(info, dict):
        raise BadRequest("The field transfer_engine_info must be a JSON object.")
    session_id = info.get("session_id")
    if not isinstance(session_id, str):
        raise BadRequest("The field transfer_engine_info.session_id must be a string.")
    weights = info.get("weights_info_dict")
    if not isinstance(weights, dict):
        raise BadRequest("The field transfer_engine_info.weights_info_dict must be a JSON object.")
    return Registration(rank, session_id, weights)


def registration_body(rank: int, session_id: str, weights_info_dict: Mapping[str, Any]) -> bytes:
    # The stdlib, whatever is installed: it writes a NaN the caller passed as
    # NaN, which the server refuses, where orjson would quietly send null.
    return stdlib_dumps(
        {
            "rank": rank,
            "transfer_engine_info": {
                "session_id": session_id,
                "weights_info_dict": dict(weights_info_dict),
            },
        }
    )


def check_world_size(rank: int, world_size: int | None) -> None:
    if world_size is not None and rank >= world_size:
        raise BadRequest(
            f"Rank {rank} is outside the world size {world_size} (valid ranks are 0 to {world_size - 1})."
        )


# -- query parameters ---------------------------------------------------


def parse_rank_param(value: str | None) -> int:
    if value is None:
        raise BadRequest("Missing rank parameter")
    rank = _parse_int(value)
    if rank is None or rank < 0:
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
    after = _parse_int(value)
    if after is None or after < 0:
        raise BadRequest("Invalid after parameter: give a non-negative integer version.")
    return after


def parse_ranks(spec: str | None) -> list[int]:
    """Parse a rank set such as ``0-3,8,10-11`` into its ranks, in order, without repeats."""
    if spec is None or not spec.strip():
        raise BadRequest("Missing ranks parameter: give ranks such as 0-7 or 0,2,5-9.")
    ranks: dict[int, None] = {}
    for part in spec.split(","):
        first_text, dash, last_text = part.strip().partition("-")
        first = _parse_int(first_text)
        last = _parse_int(last_text) if dash else first
        if first is None or last is None or first < 0 or last < first:
            raise BadRequest(f"Invalid ranks parameter: {part.strip()!r} is not a rank or a range.")
        if len(ranks) + (last - first + 1) > MAX_BATCH_RANKS:
            raise BadRequest(f"Invalid ranks parameter: a batch may name at most {MAX_BATCH_RANKS} ranks.")
        ranks.update(dict.fromkeys(range(first, last + 1)))
    return list(ranks)


def format_ranks(ranks: Iterable[int]) -> str:
    """The inverse of :func:`parse_ranks`: ``[0, 1, 2, 5]`` becomes ``0-2,5``."""
    parts: list[str] = []
    ordered = sorted(set(ranks))
    start = 0
    for index in range(1, len(ordered) + 1):
        if index == len(ordered) or ordered[index] != ordered[index - 1] + 1:
            first, last = ordered[start], ordered[index - 1]
            parts.append(str(first) if first == last else f"{first}-{last}")
            start = index
    return ",".join(parts)


def split_rank_specs(ranks: Iterable[int]) -> list[str]:
    """``ranks`` as rank specs, each short enough (``BATCH_QUERY_CHARS``) for one request's query."""
    specs: list[str] = []
    parts: list[str] = []
    length = 0
    for part in format_ranks(ranks).split(","):
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


def _parse_int(text: str) -> int | None:
    # Only plain digits: int() would also take "+3", " 3", "3_000" and "٣".
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        return None
    return int(text)


# -- replies ------------------------------------------------------------


_NOT_REGISTERED = "No transfer engine info for rank {}"
"""SPEC section 1's sentence: all an old polling server's 404 says."""
_NOT_REGISTERED_OLD = re.compile(r"No transfer engine info for rank ([0-9]{1,18})")
_DETAIL_RANGES = 20
"""How many ranges a "not registered" sentence names before it says "and N more"."""


def not_registered_detail(rank: int) -> str:
    return _NOT_REGISTERED.format(rank)


def missing_ranks_detail(missing: Sequence[int]) -> str:
    """The sentence for ranks not registered; the full list travels in ``missing``."""
    if len(missing) == 1:
        return not_registered_detail(missing[0])
    parts = format_ranks(missing).split(",")
    shown = ",".join(parts[:_DETAIL_RANGES])
    more = f" and {len(parts) - _DETAIL_RANGES} more ranges" if len(parts) > _DETAIL_RANGES else ""
    return f"No transfer engine info for ranks {shown}{more}"


def encode_not_registered(missing: Sequence[int]) -> bytes:
    """The 404 of a get, a batch get or a delete: the sentence, and the ranks in ``missing``."""
    return error_body(missing_ranks_detail(missing), missing=list(missing))


def decode_not_registered(status: int, payload: bytes) -> list[int] | None:
    """The ranks a reply says are not registered; ``None`` when it is not such a reply.

    The one place the client tells "not registered" from any other 404 (a
    wrong base URL, a proxy's page): by ``missing``, or, from an old polling
    server, by SPEC section 1's exact sentence.
    """
    if status != 404:
        return None
    try:
        reply = loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(reply, dict):
        return None
    missing = reply.get("missing")
    if isinstance(missing, list) and missing and all(is_rank(rank) for rank in missing):
        return missing
    detail = reply.get("detail")
    match = _NOT_REGISTERED_OLD.fullmatch(detail) if isinstance(detail, str) else None
    return None if match is None else [int(match.group(1))]


def error_detail(status: int, payload: bytes) -> str:
    """The ``detail`` of an error reply, or a sentence naming its status when it has none."""
    try:
        reply = loads(payload)
    except (ValueError, RecursionError):
        reply = None
    detail = reply.get("detail") if isinstance(reply, dict) else None
    if isinstance(detail, str) and detail:
        return detail
    return f"The server answered HTTP {status} without a detail."


def encode_info(record: Record) -> bytes:
    """The reply to a get of ``record``'s rank."""
    return dumps(
        {
            "rank": record.rank,
            "remote_instance_transfer_engine_info": [record.session_id, record.weights_info_dict],
            "version": record.version,
        }
    )


def encode_batch(replies: Sequence[bytes], version: int) -> bytes:
    """The reply to a batch get: the ranks' single replies, spliced, not re-encoded."""
    infos = b",".join(replies)
    return b'{"infos":[' + infos + b'],"version":' + str(version).encode() + b"}"


@dataclass(frozen=True, slots=True)
class TransferEngineInfo:
    """One rank's transfer-engine info, as a getter receives it."""

    rank: int
    session_id: str
    weights_info_dict: dict[str, Any]
    version: int


def _reply(payload: bytes, what: str) -> Any:
    try:
        return loads(payload)
    except (ValueError, RecursionError):
        raise UnexpectedReply(f"The server's reply is not JSON, so not {what}.") from None


def _info(item: Any) -> TransferEngineInfo:
    session_id, weights = item["remote_instance_transfer_engine_info"]
    return TransferEngineInfo(
        rank=int(item["rank"]),
        session_id=str(session_id),
        weights_info_dict=dict(weights),
        version=int(item.get("version", 0)),
    )


def decode_info(payload: bytes) -> TransferEngineInfo:
    """Read a get reply; :class:`UnexpectedReply` if it is not one."""
    try:
        return _info(_reply(payload, "a transfer engine info reply"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnexpectedReply(f"The server's reply is not a transfer engine info reply: {exc!r}.") from None


def decode_batch(payload: bytes) -> dict[int, TransferEngineInfo]:
    """Read a batch get reply; :class:`UnexpectedReply` if it is not one."""
    try:
        infos = [_info(item) for item in _reply(payload, "a batch reply")["infos"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnexpectedReply(f"The server's reply is not a batch reply: {exc!r}.") from None
    return {info.rank: info for info in infos}


@dataclass(frozen=True, slots=True)
class RankSummary:
    """One line of the listing of registered ranks."""

    rank: int
    session_id: str
    version: int
    registered_at: float
    age: float


@dataclass(frozen=True, slots=True)
class RankListing:
    """The server's listing: who has registered, and who is missing."""

    version: int
    world_size: int | None
    ranks: list[RankSummary]
    missing: list[int] | None
    waiters: int
    """How many waits are parked on the server right now."""


def encode_listing(
    records: Sequence[Record], version: int, world_size: int | None, waiters: int, now: float
) -> bytes:
    """The reply to ``GET /ranks``: who has registered (without weights), and who is missing."""
    registered = {record.rank for record in records}
    listing = {
        "version": version,
        "world_size": world_size,
        "count": len(records),
        "waiters": waiters,
        "ranks": [
            {
                "rank": record.rank,
                "session_id": record.session_id,
                "version": record.version,
                "registered_at": record.registered_at,
                "age": round(max(0.0, now - record.registered_at), 3),
            }
            for record in records
        ],
        "missing": None if world_size is None else [r for r in range(world_size) if r not in registered],
    }
    return dumps(listing)


def decode_listing(payload: bytes) -> RankListing:
    """Read a ``/ranks`` reply; :class:`UnexpectedReply` if it is not one."""
    reply = _reply(payload, "a rank listing")
    try:
        return RankListing(
            version=int(reply["version"]),
            world_size=reply.get("world_size"),
            ranks=[
                RankSummary(
                    rank=int(item["rank"]),
                    session_id=str(item["session_id"]),
                    version=int(item["version"]),
                    registered_at=float(item["registered_at"]),
                    age=float(item["age"]),
                )
                for item in reply["ranks"]
            ],
            missing=reply.get("missing"),
            waiters=int(reply.get("waiters", 0)),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnexpectedReply(f"The server's reply is not a rank listing: {exc!r}.") from None
