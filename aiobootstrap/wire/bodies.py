"""Request bodies, both ways: what the server accepts, and what the client sends.

The server's readers raise :class:`~aiobootstrap.exceptions.BadRequest` with a
detail naming the field; the client's writers build exactly what they read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .._json import loads, stdlib_dumps
from .._names import DEFAULT_ROLE, MAX_ROLE_LENGTH, PARALLELISM_CONFIG, TRANSFER_ENGINE_INFO, is_text
from .._ranks import MAX_RANK, rank_value
from ..exceptions import BadRequest

MAX_NESTING = 64

MAX_URL_LENGTH = 8192
"""The longest encoder URL kept, in characters: no real URL comes near it (browsers and proxies stop at a
few KiB), and a URL travels whole in every change of its list (the feed, the history, the watchers)."""

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A ``\\u`` escape of a surrogate: the only way a body (valid UTF-8, or not parsed at all) spells one."""

NOT_UNICODE = (
    "The request body holds a string that is not valid Unicode text "
    "(a lone surrogate escape such as \\ud800): no store can keep it."
)


def parse_body(body: bytes) -> dict[str, Any]:
    """A request body that must be a JSON object, nested at most :data:`MAX_NESTING` levels deep."""
    try:
        payload = loads(body)
    except (ValueError, RecursionError):
        raise BadRequest("The request body is not valid JSON.") from None
    if not isinstance(payload, dict):
        raise BadRequest("The request body must be a JSON object.")
    # No backslash (most bodies): no escape, so no surrogate, and the bytes can tell the nesting.
    escaped = b"\\" in body
    if len(body) <= _SHORT and body.count(b"[") + body.count(b"{") <= MAX_NESTING:
        within: bool | None = True  # no more levels than opening brackets, strings' ones included
    else:
        within = None if escaped else _bytes_nest_within(body, MAX_NESTING)
    if not (within if within is not None else _nests_within(payload, MAX_NESTING)):
        # Deeper than any registration needs, and deeper than a reply can always be written.
        raise BadRequest(f"The request body nests objects and arrays more than {MAX_NESTING} levels deep.")
    if escaped and _SURROGATE_ESCAPE.search(body) is not None and not _encodable(payload):
        raise BadRequest(NOT_UNICODE)
    return payload


def _encodable(payload: dict[str, Any]) -> bool:
    """Whether every string of ``payload`` (keys too) is valid Unicode text: a pair of surrogate
    escapes is one character, a lone one is not, and no store can key or write it."""
    try:
        json.dumps(payload, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def _check_role(role: str, where: str) -> str:
    if len(role) > MAX_ROLE_LENGTH:
        raise BadRequest(f"The {where} is {len(role)} characters long: the limit is {MAX_ROLE_LENGTH}.")
    if not is_text(role):
        raise BadRequest(f"The {where} is not valid Unicode text (a lone surrogate).")
    return role


# The nesting check on the bytes of a body already parsed, at the speed of
# bytes methods: keep only brackets and quotes. When every string is now two
# adjacent quotes (no string held a bracket), the brackets alone are the
# structure: peel its innermost level off per pass. A body with an escape, or
# a bracket inside a string, is checked on its parsed value (_nests_within):
# slower, and as exact.
_STRUCTURE = b'[]{}"'
_NOT_STRUCTURE = bytes(byte for byte in range(256) if byte not in _STRUCTURE)
_SQUARE_AS_CURLY = bytes.maketrans(b"[]", b"{}")
_SHORT = 1024
"""Bodies up to this size count their opening brackets first: two counts cost less than a
translation, and a registration's few brackets bound its nesting (beyond, counts cost more)."""


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
    """The role of a register body: a non-empty string of at most :data:`MAX_ROLE_LENGTH`
    characters, ``target`` when absent."""
    role = payload.get("role", DEFAULT_ROLE)
    if role is DEFAULT_ROLE:
        return role  # absent, as in most bodies: the default passes every check below
    if not isinstance(role, str) or not role:
        raise BadRequest("The field role must be a non-empty string.")
    return _check_role(role, "field role")


def parse_role_param(value: str | None) -> str:
    """The role of a query: as :func:`parse_role_field`'s."""
    if value is None:
        return DEFAULT_ROLE
    if not value:
        raise BadRequest("Invalid role parameter: give a non-empty role, such as target or draft.")
    return _check_role(value, "role parameter")


def field_of(payload: Mapping[str, Any], name: str) -> Any:
    """A required field of a body."""
    if payload.get(name) is None:
        raise BadRequest(f"The field {name} is missing.")
    return payload[name]


def is_classic(info: Mapping[str, Any]) -> bool:
    """Whether transfer-engine info is served as the classic list: untagged (no ``backend``, or ``null``).

    Any ``backend``, ``mooncake`` included, is served whole, in the shape it
    was sent: the tagging servers do so, and their loaders read it with
    ``.get("session_id")``.
    """
    return info.get("backend") is None


def session_id_of(info: Mapping[str, Any]) -> str:
    """The session id of stored transfer-engine info; ``""`` when there is none, or (another backend's info is
    not checked) not a string."""
    session_id = info.get("session_id")
    return session_id if isinstance(session_id, str) else ""


def weights_of(info: Mapping[str, Any]) -> dict[str, Any]:
    """The ``weights_info_dict`` of stored transfer-engine info (``{}`` when there is none)."""
    weights: dict[str, Any] = info.get("weights_info_dict", {})
    return weights


def parse_engine_info(info: object) -> dict[str, Any]:
    """Validate a ``transfer_engine_info`` object; it is kept whole, every field as sent."""
    name = "transfer_engine_info"
    if not isinstance(info, dict):
        raise BadRequest(f"The field {name} must be a JSON object.")
    backend = info.get("backend")
    if backend is not None and (not isinstance(backend, str) or not backend):
        raise BadRequest(f"The field {name}.backend must be a non-empty string.")
    if backend is None:  # is_classic(info)
        for field in ("session_id", "weights_info_dict"):
            if field not in info:
                raise BadRequest(f"The field {name}.{field} is required.")
        if not isinstance(info["session_id"], str):
            raise BadRequest(f"The field {name}.session_id must be a string.")
        if not isinstance(info["weights_info_dict"], dict):
            raise BadRequest(f"The field {name}.weights_info_dict must be a JSON object.")
    return info


def parse_object(value: object, name: str) -> dict[str, Any]:
    """A body field that must be a JSON object, kept whole."""
    if not isinstance(value, dict):
        raise BadRequest(f"The field {name} must be a JSON object.")
    return value


MISSING_URL_ERROR = "Missing or empty 'url' field"
"""The engines' encoder server's ``error`` for a body without a URL, which its callers may read."""
MISSING_URL_DETAIL = "Missing or empty 'url' field in request body"
"""The ``detail`` of that ``400``: the engines' standalone encoder server's own words."""


def encoder_url(value: object) -> str | None:
    """An encoder URL as it is kept: as sent, less any trailing ``/``; ``None`` when missing or empty.

    The engines' encoder server keeps ``url.rstrip("/")``: ``http://e:8000/``
    and ``http://e:8000`` are one encoder. A URL that is only slashes is empty.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest("The field url must be a string.")
    if len(value) > MAX_URL_LENGTH:
        raise BadRequest(f"The field url is {len(value)} characters long: the limit is {MAX_URL_LENGTH}.")
    return value.rstrip("/") or None


def parse_url_body(body: bytes) -> str | None:
    """The ``url`` of an encoder URL body, as kept (:func:`encoder_url`); ``None`` when missing or empty."""
    return encoder_url(parse_body(body).get("url"))


def check_world_size(rank: int, world_size: int | None) -> None:
    if world_size is not None and rank >= world_size:
        raise BadRequest(
            f"Rank {rank} is outside the world size {world_size} (valid ranks are 0 to {world_size - 1})."
        )


# -- the client's bodies ------------------------------------------------


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
    _mapping(weights_info_dict, "weights_info_dict")
    info: dict[str, Any] = dict(_mapping(fields or {}, "fields"))
    if session_id is not None:
        info["session_id"] = session_id
    info["weights_info_dict"] = dict(weights_info_dict)
    return _register_body(rank, TRANSFER_ENGINE_INFO, info, role)


def config_body(rank: int, config: Mapping[str, Any], role: str = DEFAULT_ROLE) -> bytes:
    """A register body of a parallelism config."""
    return _register_body(rank, PARALLELISM_CONFIG, dict(_mapping(config, "config")), role)


def _mapping(value: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """``value``, a mapping, else a ``TypeError`` naming the argument (``{...}`` is a set, not a dict)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping (a dict), not {type(value).__name__}: {value!r:.80}")
    return value


def url_body(url: str) -> bytes:
    """The body of an encoder URL's registration or removal: what ``parse_url_body`` reads."""
    return stdlib_dumps({"url": url})
