"""The wire format, shared by the server and the client.

Everything both ends must agree on lives here and nowhere else: the routes,
the parameter grammar, the JSON shapes and the error texts. Nothing here does
I/O. On the server's side a malformed value raises
:class:`~aiobootstrap.exceptions.BadRequest` with a detail that names the
field; on the client's side a reply that is not what the protocol allows
raises :class:`~aiobootstrap.exceptions.UnexpectedReply`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._json import dumps as dumps
from ._json import loads as loads
from ._json import stdlib_dumps as stdlib_dumps
from ._ranks import MAX_RANK as MAX_RANK
from ._ranks import RankSet, parse_int
from ._ranks import is_rank as is_rank
from ._ranks import rank_value as rank_value
from .exceptions import BadRequest, UnexpectedReply
from .store._base import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE
from .store._base import DEFAULT_ROLE

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
    "RankSet",
    "Registration",
    "TransferEngineInfo",
]

HEALTH_PATH = "/health"
READY_PATH = "/ready"
REGISTER_PATH = "/register_transfer_engine_info"
GET_PATH = "/get_transfer_engine_info"
BATCH_PATH = "/get_transfer_engine_info_batch"
CONFIG_REGISTER_PATH = "/register_parallelism_config"
CONFIG_GET_PATH = "/get_parallelism_config"
CONFIG_BATCH_PATH = "/get_parallelism_config_batch"
ENCODER_REGISTER_PATH = "/register_encoder_url"
ENCODER_UNREGISTER_PATH = "/unregister_encoder_url"
ENCODER_LIST_PATH = "/list_encoder_urls"
RANKS_PATH = "/ranks"
METRICS_PATH = "/metrics"
OPENAPI_PATH = "/openapi.json"

JSON_TYPE = "application/json"

HEALTH_HEADER = "X-Aiobootstrap"
"""A header on the ``/health`` reply, naming the version: tells an aiobootstrap server from others."""

BOOT_HEADER = "X-Aiobootstrap-Boot"
"""Every reply names the server's boot: a new value means the server restarted (and may be empty)."""

VERSION_HEADER = "X-Aiobootstrap-Version"
"""On a get's reply: the version of the record served (a parallelism config's body is the bare object)."""

BATCH_QUERY_CHARS = 4000
"""The longest rank spec a client puts in one batch query: well inside an 8 KiB request line."""

MAX_BATCH_RANKS = 1 << 16
"""The most ranks one batch request may name (65,536): past it a ``400``; the client splits larger sets.

A set is kept as ranges, so naming many ranks is cheap to parse; the cap bounds
what one request may make the server look at and report.
"""

MISSING_LIST_MAX = 1024
"""The most ranks a batch ``404`` or a listing names in ``missing``; ``missing_ranks`` holds them all, as ranges."""

MAX_NESTING = 64
"""The deepest a request body may nest objects and arrays (the body itself is level 1)."""


# -- JSON ---------------------------------------------------------------


def error_body(detail: str, **extra: Any) -> bytes:
    return dumps({"detail": detail, **extra})


# -- namespaces ---------------------------------------------------------

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
    """A validated register request of transfer-engine info."""

    rank: int
    session_id: str
    weights_info_dict: dict[str, Any]
    role: str = DEFAULT_ROLE
    info: dict[str, Any] | None = None
    """The whole ``transfer_engine_info`` object as sent (every field kept)."""


def parse_body(body: bytes) -> dict[str, Any]:
    """A request body that must be a JSON object, nested at most :data:`MAX_NESTING` levels deep."""
    try:
        payload = loads(body)
    except (ValueError, RecursionError):
        raise BadRequest("The request body is not valid JSON.") from None
    if not isinstance(payload, dict):
        raise BadRequest("The request body must be a JSON object.")
    within = _bytes_nest_within(body, MAX_NESTING)
    if not (within if within is not None else _nests_within(payload, MAX_NESTING)):
        # Deeper than any registration needs, and deeper than a reply can always be written.
        raise BadRequest(f"The request body nests objects and arrays more than {MAX_NESTING} levels deep.")
    return payload


# The nesting check on the bytes of a body already parsed, at the speed of
# bytes methods: keep only brackets and quotes. When every string is now two
# adjacent quotes (no string held a bracket), the brackets alone are the
# structure: peel its innermost level off per pass. A body with an escape, or
# a bracket inside a string, is checked on its parsed value (_nests_within):
# slower, and as exact.
_STRUCTURE = b'[]{}"'
_NOT_STRUCTURE = bytes(byte for byte in range(256) if byte not in _STRUCTURE)
_SQUARE_AS_CURLY = bytes.maketrans(b"[]", b"{}")


def _bytes_nest_within(body: bytes, limit: int) -> bool | None:
    """Whether valid JSON ``body`` nests at most ``limit`` levels; ``None`` when the bytes cannot tell."""
    if b"\\" in body:
        return None
    kept = body.translate(None, _NOT_STRUCTURE)
    # Counted left to right, adjacent pairs cover every quote only when each
    # string's two quotes are adjacent: no bracket inside any string.
    if kept.count(b'""') * 2 != kept.count(b'"'):
        return None
    brackets = kept.translate(_SQUARE_AS_CURLY, b'"')
    for _ in range(limit):
        if not brackets:
            return True
        brackets = brackets.replace(b"{}", b"")
    return not brackets


def _nests_within(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests at most ``limit`` levels of objects and arrays."""
    if limit <= 0:
        return False
    for item in value.values() if isinstance(value, dict) else value:
        if isinstance(item, dict | list) and not _nests_within(item, limit - 1):
            return False
    return True


def parse_rank_field(payload: Mapping[str, Any]) -> int:
    """The rank of a register body: ``rank``, or from older clients ``tp_rank`` (``rank`` wins)."""
    if "rank" in payload:
        rank = payload["rank"]
    elif "tp_rank" in payload:
        rank = payload["tp_rank"]
    else:
        raise BadRequest("The field rank is missing: send a non-negative integer rank.")
    if isinstance(rank, str) or (checked := rank_value(rank)) is None:
        raise BadRequest(
            f"The field rank must be a non-negative integer of at most {len(str(MAX_RANK))} digits."
        )
    return checked


def parse_role_field(payload: Mapping[str, Any]) -> str:
    """The role of a register body: a non-empty string, ``target`` when absent."""
    role = payload.get("role", DEFAULT_ROLE)
    if not isinstance(role, str) or not role:
        raise BadRequest("The field role must be a non-empty string.")
    return role


def parse_role_param(value: str | None) -> str:
    """The role of a query: a non-empty string, ``target`` when absent."""
    if value is None:
        return DEFAULT_ROLE
    if not value:
        raise BadRequest("Invalid role parameter: give a non-empty role, such as target or draft.")
    return value


def field_of(payload: Mapping[str, Any], name: str) -> Any:
    """A required field of a body."""
    if payload.get(name) is None:
        raise BadRequest(f"The field {name} is missing.")
    return payload[name]


CLASSIC_BACKEND = "mooncake"
"""The backend whose info is served in the classic list form ``[session_id, weights_info_dict]``."""


def is_classic(info: Mapping[str, Any]) -> bool:
    """Whether transfer-engine info is served as the classic list (no ``backend``, or ``mooncake``)."""
    return info.get("backend") in (None, CLASSIC_BACKEND)


def parse_engine_info(info: object) -> dict[str, Any]:
    """Validate a ``transfer_engine_info`` object; it is kept whole, every field as sent."""
    name = "transfer_engine_info"
    if not isinstance(info, dict):
        raise BadRequest(f"The field {name} must be a JSON object.")
    backend = info.get("backend")
    if backend is not None and (not isinstance(backend, str) or not backend):
        raise BadRequest(f"The field {name}.backend must be a non-empty string.")
    if is_classic(info):
        if not isinstance(info.get("session_id"), str):
            raise BadRequest(f"The field {name}.session_id must be a string.")
        if not isinstance(info.get("weights_info_dict"), dict):
            raise BadRequest(f"The field {name}.weights_info_dict must be a JSON object.")
    return info


def parse_object(value: object, name: str) -> dict[str, Any]:
    """A body field that must be a JSON object, kept whole."""
    if not isinstance(value, dict):
        raise BadRequest(f"The field {name} must be a JSON object.")
    return value


def parse_registration(body: bytes) -> Registration:
    """Validate a register request body of transfer-engine info."""
    payload = parse_body(body)
    rank = parse_rank_field(payload)
    role = parse_role_field(payload)
    info = parse_engine_info(field_of(payload, "transfer_engine_info"))
    return Registration(rank, info.get("session_id", ""), info.get("weights_info_dict", {}), role, info)


def parse_url_body(body: bytes) -> str:
    """The ``url`` of an encoder URL body: a non-empty string."""
    url = parse_body(body).get("url")
    if url is None:
        raise BadRequest("The field url is missing: send the encoder's URL as a string.")
    if not isinstance(url, str) or not url:
        raise BadRequest("The field url must be a non-empty string.")
    return url


def registration_body(rank: int, session_id: str, weights_info_dict: Mapping[str, Any]) -> bytes:
    """A classic register body of transfer-engine info (see :func:`engine_info_body` for the rest)."""
    return engine_info_body(rank, session_id, weights_info_dict)


def check_world_size(rank: int, world_size: int | None) -> None:
    if world_size is not None and rank >= world_size:
        raise BadRequest(
            f"Rank {rank} is outside the world size {world_size} (valid ranks are 0 to {world_size - 1})."
        )


# -- query parameters ---------------------------------------------------


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


def parse_ranks(spec: str | None) -> RankSet:
    """Parse a rank set such as ``0-3,8,10-11``, kept as ranges: at most :data:`MAX_BATCH_RANKS` ranks."""
    if spec is None or not spec.strip():
        raise BadRequest("Missing ranks parameter: give ranks such as 0-7 or 0,2,5-9.")
    return RankSet.parse(spec, limit=MAX_BATCH_RANKS)


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


# -- replies ------------------------------------------------------------


ENGINE_INFO_NOUN = "transfer engine info"
"""How transfer-engine info is named in the sentences of its 404s."""
_NOT_REGISTERED = "No transfer engine info for rank {}"
"""SPEC section 1's sentence: all an old polling server's 404 says."""
_NOT_REGISTERED_OLD = re.compile(r"No transfer engine info for rank ([0-9]{1,18})")
_DETAIL_RANGES = 20
"""How many ranges a "not registered" sentence names before it says "and N more"."""


def not_registered_detail(rank: int) -> str:
    return _NOT_REGISTERED.format(rank)


def missing_ranks_detail(missing: Sequence[int] | RankSet, noun: str = ENGINE_INFO_NOUN) -> str:
    """The sentence for ranks not registered, naming at most a few ranges.

    ``noun`` names the record kind: ``No parallelism config for rank 3``.
    """
    ranks = missing if isinstance(missing, RankSet) else RankSet.from_ranks(missing)
    if len(ranks) == 1:
        return f"No {noun} for rank {ranks.first}"
    more = len(ranks.ranges) - _DETAIL_RANGES
    tail = f" and {more} more ranges" if more > 0 else ""
    return f"No {noun} for ranks {ranks.format(_DETAIL_RANGES)}{tail}"


def encode_not_registered(missing: Sequence[int] | RankSet, noun: str = ENGINE_INFO_NOUN) -> bytes:
    """The 404 of a get or a delete (its rank in ``missing``), or of a batch get (``missing`` a :class:`RankSet`).

    A batch's reply stays small whatever the set: ``missing`` lists at most
    :data:`MISSING_LIST_MAX` ranks (the smallest; ``"missing_truncated": true``
    says there are more), and ``missing_ranks`` holds them all as a spec.
    """
    detail = missing_ranks_detail(missing, noun)
    if not isinstance(missing, RankSet):
        return error_body(detail, missing=list(missing))
    return error_body(detail, **_missing_fields(missing))


def _missing_fields(missing: RankSet) -> dict[str, Any]:
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
    if status != 404:
        return None
    try:
        reply = loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(reply, dict):
        return None
    spec = reply.get("missing_ranks")
    if isinstance(spec, str) and spec:
        try:
            return list(RankSet.parse(spec, limit=MAX_BATCH_RANKS))
        except BadRequest:
            pass
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
    """The reply to a get of ``record``'s rank: the classic list, or a tagged backend's whole object."""
    value = record.value
    info: Any = [record.session_id, record.weights_info_dict] if is_classic(value) else value
    return dumps(
        {"rank": record.rank, "remote_instance_transfer_engine_info": info, "version": record.version}
    )


def encode_info_object(record: Record) -> bytes:
    """The reply to a get of ``record``'s rank with ``form=object``: the info whole, as registered."""
    return dumps(
        {"rank": record.rank, "remote_instance_transfer_engine_info": record.value, "version": record.version}
    )


FORMS = ("list", "object")
"""What ``form=`` may ask: ``object`` serves a registration whole; ``list`` (the default) the classic shape."""


def parse_form(value: str | None) -> bool:
    """Whether ``form=object`` was asked."""
    if value is None or value == "list":
        return False
    if value == "object":
        return True
    raise BadRequest("Invalid form parameter: give object (the registration whole) or list (the default).")


def encode_encoder_urls(urls: Sequence[str], version: int) -> bytes:
    """The reply of ``GET /list_encoder_urls``."""
    return dumps({"encoder_urls": list(urls), "version": version})


def encode_batch(replies: Sequence[bytes], version: int) -> bytes:
    """The reply to a batch get of transfer-engine info: the ranks' single replies, spliced, not re-encoded."""
    return encode_items("infos", replies, version)


def encode_items(field: str, items: Sequence[bytes], version: int) -> bytes:
    """A batch reply ``{field: [items...], "version": V}``, the encoded items spliced in."""
    return b'{"' + field.encode() + b'":[' + b",".join(items) + b'],"version":' + str(version).encode() + b"}"


@dataclass(frozen=True, slots=True)
class TransferEngineInfo:
    """One rank's transfer-engine info, as a getter receives it.

    ``fields`` is the ``transfer_engine_info`` object as far as the reply shows
    it: the whole registration for a backend-tagged one (NIXL's
    ``backend``, ``agent_name``, ``agent_metadata``, ...) or one read with
    ``whole=True``; ``session_id`` and ``weights_info_dict`` for classic info
    read in its list form. ``session_id`` is ``""`` when the rank sent none.
    """

    rank: int
    session_id: str
    weights_info_dict: dict[str, Any]
    version: int
    role: str = DEFAULT_ROLE
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.fields:
            # Built by hand with the classic fields only: they are the whole of it.
            classic = {"session_id": self.session_id, "weights_info_dict": self.weights_info_dict}
            object.__setattr__(self, "fields", classic)

    @property
    def backend(self) -> str | None:
        """The ``backend`` the rank tagged its info with (``None`` for classic info)."""
        backend = self.fields.get("backend")
        return backend if isinstance(backend, str) else None


def _reply(payload: bytes, what: str) -> Any:
    try:
        return loads(payload)
    except (ValueError, RecursionError):
        raise UnexpectedReply(f"The server's reply is not JSON, so not {what}.") from None


def _info(item: Any, role: str = DEFAULT_ROLE) -> TransferEngineInfo:
    info = item["remote_instance_transfer_engine_info"]
    if isinstance(info, dict):
        # A tagged backend's object, or any registration read with form=object: every field.
        fields = dict(info)
        session_id, weights = fields.get("session_id", ""), fields.get("weights_info_dict", {})
    else:
        session_id, weights = info
        fields = {"session_id": session_id, "weights_info_dict": weights}
    return TransferEngineInfo(
        rank=int(item["rank"]),
        session_id=str(session_id),
        weights_info_dict=dict(weights),
        version=int(item.get("version", 0)),
        role=role,
        fields=fields,
    )


def decode_info(payload: bytes, role: str = DEFAULT_ROLE) -> TransferEngineInfo:
    """Read a get reply, list or object form; :class:`UnexpectedReply` if it is not one."""
    try:
        return _info(_reply(payload, "a transfer engine info reply"), role)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnexpectedReply(f"The server's reply is not a transfer engine info reply: {exc!r}.") from None


def decode_batch(payload: bytes, role: str = DEFAULT_ROLE) -> dict[int, TransferEngineInfo]:
    """Read a batch get reply; :class:`UnexpectedReply` if it is not one."""
    try:
        infos = [_info(item, role) for item in _reply(payload, "a batch reply")["infos"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnexpectedReply(f"The server's reply is not a batch reply: {exc!r}.") from None
    return {info.rank: info for info in infos}


@dataclass(frozen=True, slots=True)
class RankSummary:
    """One line of the listing of registered ranks."""

    rank: int
    session_id: str | None
    """``None`` for a record without one (a parallelism config, NIXL-tagged info)."""
    version: int
    registered_at: float
    age: float
    backend: str | None = None
    """The backend transfer-engine info was tagged with; ``None`` for classic info and other kinds."""


@dataclass(frozen=True, slots=True)
class RankListing:
    """The server's listing of one kind and role: who has registered, and who is missing."""

    version: int
    world_size: int | None
    ranks: list[RankSummary]
    missing: list[int] | None
    """The ranks of ``[0, world_size)`` not registered: all of them, or the first
    :data:`MISSING_LIST_MAX` when there are more (``missing_ranks`` has them all);
    ``None`` without a world size."""
    waiters: int
    """How many waits are parked on the server right now."""
    kind: str = "transfer_engine_info"
    role: str = DEFAULT_ROLE
    missing_ranks: RankSet | None = None
    """Every rank of ``[0, world_size)`` not registered, as ranges (exact however many);
    ``None`` without a world size."""


def engine_summary(record: Record) -> dict[str, Any]:
    summary: dict[str, Any] = {"session_id": record.session_id}
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
    kind: str = "transfer_engine_info",
    role: str = DEFAULT_ROLE,
    summary: Callable[[Record], dict[str, Any]] = engine_summary,
) -> bytes:
    """The reply to ``GET /ranks``: one kind and role's registered ranks (without values), and who is missing.

    ``summary`` is what an item shows of its record besides rank, version and
    times (for transfer-engine info: ``session_id``, and ``backend`` when tagged).
    """
    missing = None if world_size is None else missing_in_world(world_size, (r.rank for r in records))
    listing = {
        "version": version,
        "kind": kind,
        "role": role,
        "world_size": world_size,
        "count": len(records),
        "waiters": waiters,
        "ranks": [
            {
                "rank": record.rank,
                **summary(record),
                "version": record.version,
                "registered_at": record.registered_at,
                "age": round(max(0.0, now - record.registered_at), 3),
            }
            for record in records
        ],
        **({"missing": None, "missing_ranks": None} if missing is None else _missing_fields(missing)),
    }
    return dumps(listing)


def missing_in_world(world_size: int, registered: Iterable[int]) -> RankSet:
    """The ranks of ``[0, world_size)`` not in ``registered``: its cost grows with what is registered,
    not with the world size."""
    return RankSet.below(world_size).without(registered)


def decode_listing(payload: bytes) -> RankListing:
    """Read a ``/ranks`` reply of any kind and role; :class:`UnexpectedReply` if it is not one.

    An older server's listing (no ``kind`` or ``role``) is transfer-engine info of role ``target``.
    """
    reply = _reply(payload, "a rank listing")
    try:
        return RankListing(
            version=int(reply["version"]),
            world_size=reply.get("world_size"),
            ranks=[_summary(item) for item in reply["ranks"]],
            missing=reply.get("missing"),
            waiters=int(reply.get("waiters", 0)),
            kind=str(reply.get("kind", "transfer_engine_info")),
            role=str(reply.get("role", DEFAULT_ROLE)),
            missing_ranks=_listed_missing(reply),
        )
    except (KeyError, TypeError, ValueError, AttributeError, BadRequest) as exc:
        raise UnexpectedReply(f"The server's reply is not a rank listing: {exc!r}.") from None


def _listed_missing(reply: dict[str, Any]) -> RankSet | None:
    """A listing's missing ranks: its ``missing_ranks`` spec, or, from a server that sends
    none (its ``missing`` then lists them all), its ``missing``."""
    spec = reply.get("missing_ranks")
    if isinstance(spec, str):
        return RankSet.parse(spec, name="missing_ranks") if spec else RankSet()
    missing = reply.get("missing")
    return None if missing is None else RankSet.from_ranks(int(rank) for rank in missing)


def _summary(item: Any) -> RankSummary:
    session_id, backend = item.get("session_id"), item.get("backend")
    return RankSummary(
        rank=int(item["rank"]),
        session_id=None if session_id is None else str(session_id),
        version=int(item["version"]),
        registered_at=float(item["registered_at"]),
        age=float(item["age"]),
        backend=None if backend is None else str(backend),
    )


# -- the client's side of roles, parallelism configs and encoder URLs ----


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
    query = {} if kind == "transfer_engine_info" else {"kind": kind}
    return with_role(query, role)


def _register_body(rank: int, field_name: str, value: Mapping[str, Any], role: str) -> bytes:
    body: dict[str, Any] = {"rank": rank, field_name: value}
    if role != DEFAULT_ROLE:
        body["role"] = role
    # The stdlib, whatever is installed: a NaN the caller passed is sent as NaN,
    # which the server refuses, where orjson would quietly send null.
    return stdlib_dumps(body)


def engine_info_body(
    rank: int,
    session_id: str | None,
    weights_info_dict: Mapping[str, Any],
    fields: Mapping[str, Any] | None = None,
    role: str = DEFAULT_ROLE,
) -> bytes:
    """A register body of transfer-engine info: the classic fields, and any others (``backend``...)."""
    info: dict[str, Any] = dict(fields or {})
    if session_id is not None:
        info["session_id"] = session_id
    info["weights_info_dict"] = dict(weights_info_dict)
    return _register_body(rank, "transfer_engine_info", info, role)


def config_body(rank: int, config: Mapping[str, Any], role: str = DEFAULT_ROLE) -> bytes:
    """A register body of a parallelism config."""
    return _register_body(rank, "parallelism_config", dict(config), role)


def url_body(url: str) -> bytes:
    """The body of an encoder URL's registration or removal: what ``parse_url_body`` reads."""
    return stdlib_dumps({"url": url})


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


def decode_version_header(value: str | None) -> int:
    """The version an ``X-Aiobootstrap-Version`` header names; 0 when absent (a server without it)."""
    version = None if value is None else rank_value(value)
    return 0 if version is None else version


@dataclass(frozen=True, slots=True)
class ParallelismConfig:
    """One rank's parallelism config, as a getter receives it: the object exactly as registered."""

    rank: int
    config: dict[str, Any]
    version: int
    role: str = DEFAULT_ROLE


def decode_config(
    payload: bytes, rank: int, version: str | None, role: str = DEFAULT_ROLE
) -> ParallelismConfig:
    """Read a parallelism config get's reply: the bare object; its version travels in the header."""
    config = _reply(payload, "a parallelism config")
    if not isinstance(config, dict):
        raise UnexpectedReply("The server's reply is not a parallelism config: not a JSON object.")
    return ParallelismConfig(rank, config, decode_version_header(version), role)


def decode_config_batch(payload: bytes, role: str = DEFAULT_ROLE) -> dict[int, ParallelismConfig]:
    """Read a parallelism config batch reply ``{"configs": [...], "version": V}``."""
    try:
        items = _reply(payload, "a parallelism config batch reply")["configs"]
        configs = [
            ParallelismConfig(int(item["rank"]), dict(item["parallelism_config"]), int(item["version"]), role)
            for item in items
        ]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UnexpectedReply(
            f"The server's reply is not a parallelism config batch reply: {exc!r}."
        ) from None
    return {config.rank: config for config in configs}


@dataclass(frozen=True, slots=True)
class EncoderUrls:
    """The encoder URL list at one version, in order of first registration."""

    urls: list[str]
    version: int
    """Grows with every change of the list; ``after=`` this to wait for the next one."""


def decode_encoder_urls(payload: bytes) -> EncoderUrls:
    """Read ``GET /list_encoder_urls``'s reply; a server without versions gives version 0."""
    reply = _reply(payload, "an encoder URL list")
    urls = reply.get("encoder_urls") if isinstance(reply, dict) else None
    if not isinstance(urls, list) or not all(isinstance(url, str) for url in urls):
        raise UnexpectedReply(
            "The server's reply is not an encoder URL list: no list of strings in encoder_urls."
        )
    version = reply.get("version", 0)
    if not is_rank(version):  # the same grammar: a non-negative integer
        raise UnexpectedReply("The server's reply is not an encoder URL list: its version is not an integer.")
    return EncoderUrls(urls, version)
