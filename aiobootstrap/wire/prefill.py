"""SGLang's prefill bootstrap protocol (PD disaggregation, SPEC section 13), both ways: what a prefill
rank registers, what decode asks, and the exact replies its code reads. No I/O here.

A prefill rank is four coordinates, (dp, cp, tp, pp); its deployment's
*topology* is their sizes and what every rank must agree on (page size, KV
cache dtype). The engines' server reads these bodies with ``data[...]`` and
``int()``, so a missing or malformed field was a ``500``: here it is a
:class:`BadRequest` naming the field, and nothing is stored. A deployment has
at most :data:`MAX_RANKS` ranks. The fields passed through to decode are in
``prefill_fields``; the bootstrap rooms in ``prefill_rooms``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..exceptions import BadRequest
from .prefill_fields import INTEGER_FIELDS, info_fields, passed_fields, refusal

__all__ = [
    "MAX_RANKS",
    "MISSING_INPUTS",
    "PREFILL_RANK",
    "PREFILL_ROOM",
    "PREFILL_TOPOLOGY",
    "ROUTE_PARAMS",
    "TOPOLOGY_NAME",
    "Coords",
    "MissingInputs",
    "PrefillRank",
    "Topology",
    "coords_of",
    "encode_address",
    "not_found_text",
    "not_ready_text",
    "parse_prefill_rank",
    "parse_route_query",
    "whole",
]

PREFILL_RANK = "prefill_rank"
"""The record kind of a prefill rank's registration (named by its coordinates: :attr:`Coords.name`)."""
PREFILL_TOPOLOGY = "prefill_topology"
"""The record kind of a deployment's topology: one record, named ``topology``, fixed by the first rank."""
TOPOLOGY_NAME = "topology"
"""The name of a namespace's one ``prefill_topology`` record."""
PREFILL_ROOM = "prefill_room"
"""The record kind of a bootstrap room's dp rank (named by the room)."""

MISSING_INPUTS = "Missing inputs for bootstrap server."
"""The engines' text ``400`` of a ``GET /route`` without its four parameters."""

ROUTE_PARAMS = ("prefill_dp_rank", "prefill_cp_rank", "target_tp_rank", "target_pp_rank")
"""``GET``/``DELETE /route``'s four parameters, in the order decode sends them (all four ``-1``: every rank)."""
_NULLS = (
    "target_tp_rank",
    "target_tp_ranks",
    "target_cp_ranks",
    "target_pp_ranks",
    "required_dst_info_num",
    "required_prefill_response_num",
)
"""Keys the engines' parallel info sends as ``null`` (decode fills them itself)."""
MAX_RANKS = 65_536
"""The most ranks one prefill deployment may have (the product of its four sizes, as ``--max-ranks``' default):
a rank saying more is a ``400``, so no reply nor listing is ever made of millions of ranks (issue 41, item 6)."""


_SAID = {
    "dp_size": "dp size (attn_dp_size, or system_dp_size when it is not 1)",
    "cp_size": "attn_cp_size",
    "tp_size": "attn_tp_size",
    "pp_size": "pp_size",
    "page_size": "page_size",
    "kv_cache_dtype": "kv_cache_dtype",
}
"""The topology's fields a later rank must agree on, as the engines' body names them."""


class MissingInputs(BadRequest):
    """``GET /route`` without all four parameters: the engines' text ``400``, :data:`MISSING_INPUTS`."""

    def __init__(self) -> None:
        super().__init__(MISSING_INPUTS)


@dataclass(frozen=True, slots=True)
class Coords:
    """A prefill rank's place: data-parallel, context-parallel, tensor-parallel, pipeline-parallel rank."""

    dp: int
    cp: int
    tp: int
    pp: int

    @property
    def name(self) -> str:
        """Its record's name, which ``/watch`` shows: ``dp0-cp0-tp1-pp0``."""
        return f"dp{self.dp}-cp{self.cp}-tp{self.tp}-pp{self.pp}"

    def says(self) -> str:
        return f"dp_rank={self.dp} cp_rank={self.cp} tp_rank={self.tp} pp_rank={self.pp}"


@dataclass(frozen=True, slots=True)
class Topology:
    """What the first registration fixes for every rank of the deployment."""

    dp_size: int
    cp_size: int
    tp_size: int
    pp_size: int
    page_size: int
    kv_cache_dtype: str
    follow_bootstrap_room: bool
    fields: tuple[tuple[str, Any], ...] = ()
    """The fields passed through to the parallel info (``wire.prefill_fields``): a rank's, as it sent them; a
    deployment's, as the first rank to send each sent it."""

    @property
    def expected(self) -> int:
        """How many ranks make the deployment complete."""
        return self.dp_size * self.cp_size * self.tp_size * self.pp_size

    def within(self, coords: Coords) -> bool:
        """Whether ``coords`` is a rank of this topology."""
        return (
            coords.dp < self.dp_size
            and coords.cp < self.cp_size
            and coords.tp < self.tp_size
            and coords.pp < self.pp_size
        )

    def missing(self, present: set[str], most: int) -> tuple[list[str], int]:
        """The names of the first ``most`` ranks of the topology not in ``present`` (in order), and how many
        are missing in all: no list of every rank is made (issue 41, item 6)."""
        named = {name for name in present if self.within(Coords(**coords_of(name)))}
        shown: list[str] = []
        if len(named) < self.expected:
            for dp in range(self.dp_size):
                for cp in range(self.cp_size):
                    for tp in range(self.tp_size):
                        for pp in range(self.pp_size):
                            name = Coords(dp, cp, tp, pp).name
                            if name not in named:
                                shown.append(name)
                                if len(shown) >= most:
                                    return shown, self.expected - len(named)
        return shown, self.expected - len(named)

    def contradiction(self, other: Topology) -> str | None:
        """The first of sizes, page size and KV dtype ``other`` gives differently, said with both, or SGLang's
        refusal of a field every rank must agree on (``prefill_fields.REFUSED``); else ``None``."""
        for field, said in _SAID.items():
            mine, theirs = getattr(self, field), getattr(other, field)
            if mine != theirs:
                return (
                    f"The prefill topology registered has {said} {mine!r}, and this rank says {theirs!r}: "
                    "every rank of a deployment must agree (DELETE /route with all four -1 to start anew)."
                )
        return refusal(dict(self.fields), dict(other.fields))

    def as_value(self) -> dict[str, Any]:
        """The topology as its record keeps it."""
        return {
            "dp_size": self.dp_size,
            "cp_size": self.cp_size,
            "tp_size": self.tp_size,
            "pp_size": self.pp_size,
            "page_size": self.page_size,
            "kv_cache_dtype": self.kv_cache_dtype,
            "follow_bootstrap_room": self.follow_bootstrap_room,
            "optional": dict(self.fields),  # the passed fields' name in records since issue 28
        }

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> Topology:
        sizes = (value["dp_size"], value["cp_size"], value["tp_size"], value["pp_size"])
        fields = tuple(value.get("optional", {}).items())
        return cls(
            *sizes, value["page_size"], value["kv_cache_dtype"], value["follow_bootstrap_room"], fields
        )

    def parallel_info(self) -> bytes:
        """``GET /route`` with the four ``-1``s: the engines' reply, key for key."""
        info: dict[str, Any] = {
            "attn_tp_size": self.tp_size,
            "attn_cp_size": self.cp_size,
            "dp_size": self.dp_size,
            "pp_size": self.pp_size,
            "page_size": self.page_size,
            "kv_cache_dtype": self.kv_cache_dtype,
            "follow_bootstrap_room": self.follow_bootstrap_room,
            **info_fields(dict(self.fields)),
            **dict.fromkeys(_NULLS),
        }
        return json.dumps(info).encode()


@dataclass(frozen=True, slots=True)
class PrefillRank:
    """One ``PUT /route``: the rank, the topology it belongs to, and the body as it is kept."""

    coords: Coords
    topology: Topology
    value: dict[str, Any]


def whole(value: object) -> int | None:
    """``value`` as an integer if JSON says it is one (``3``, or ``3.0``, as JSON Schema counts it), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _integer(payload: Mapping[str, Any], name: str, *, least: int) -> int:
    value = payload.get(name)
    if type(value) is int and value >= least:
        return value  # what every rank sends: checked in one step
    if name not in payload:
        raise BadRequest(f"The field {name} is missing.")
    value = whole(payload[name])
    if value is None:
        raise BadRequest(f"The field {name} must be an integer, not {json.dumps(payload[name])[:64]}.")
    if value < least:
        raise BadRequest(f"The field {name} must be at least {least}, not {value}.")
    return value


def _text(payload: Mapping[str, Any], name: str) -> str:
    value = payload.get(name)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"The field {name} must be a non-empty string.")
    return value


def _rank_within(payload: Mapping[str, Any], rank: str, size: str) -> tuple[int, int]:
    """The rank and size fields ``rank`` and ``size``, the rank below the size (a ``400`` naming both)."""
    of, within = _integer(payload, size, least=1), _integer(payload, rank, least=0)
    if within >= of:
        raise BadRequest(f"The field {rank} is {within}, outside {size} {of}: ranks run from 0 to {of - 1}.")
    return within, of


def _bounded(sizes: Mapping[str, int]) -> None:
    """A ``400`` unless the topology of ``sizes`` has at most :data:`MAX_RANKS` ranks."""
    ranks = math.prod(sizes.values())
    if ranks <= MAX_RANKS:
        return
    each = " x ".join(f"{name} {_said(size)}" for name, size in sizes.items())
    raise BadRequest(
        f"The prefill topology {each} is {_said(ranks)} ranks: at most {MAX_RANKS} in one deployment."
    )


def _said(number: int) -> str:
    """``number`` as a sentence says it (one past 18 digits as ``over 10**18``: never thousands of digits)."""
    return str(number) if number < 10**18 else "over 10**18"


def parse_prefill_rank(payload: Mapping[str, Any]) -> PrefillRank:
    """A prefill rank's ``PUT /route`` body (``register_to_bootstrap``'s), checked field by field.

    The dp rank and size are ``attn_dp_*`` when ``system_dp_size`` is 1 and
    ``system_dp_*`` otherwise, as the engines' server reads them. Every field
    sent is kept in the rank's record, but ``lease`` (the registry's, not the
    engine's); those decode reads back are the topology's ``fields``
    (``prefill_fields.passed_fields``, which checks SGLang 0.5.23's six).
    """
    tp, tp_size = _rank_within(payload, "attn_tp_rank", "attn_tp_size")
    cp, cp_size = _rank_within(payload, "attn_cp_rank", "attn_cp_size")
    pp, pp_size = _rank_within(payload, "pp_rank", "pp_size")
    attn_dp, attn_dp_size = _rank_within(payload, "attn_dp_rank", "attn_dp_size")
    system_dp, system_dp_size = _rank_within(payload, "system_dp_rank", "system_dp_size")
    dp, dp_size = (attn_dp, attn_dp_size) if system_dp_size == 1 else (system_dp, system_dp_size)
    _text(payload, "rank_ip")
    port = _integer(payload, "rank_port", least=1)
    if port > 65_535:
        raise BadRequest(f"The field rank_port must be a port, 1 to 65535, not {port}.")
    page_size = _integer(payload, "page_size", least=1)
    kv_cache_dtype = _text(payload, "kv_cache_dtype")
    balance = payload.get("load_balance_method", "follow_bootstrap_room")
    if not isinstance(balance, str):
        raise BadRequest("The field load_balance_method must be a string.")
    _bounded({"dp": dp_size, "cp": cp_size, "tp": tp_size, "pp": pp_size})
    topology = Topology(
        dp_size,
        cp_size,
        tp_size,
        pp_size,
        page_size,
        kv_cache_dtype,
        balance == "follow_bootstrap_room",
        passed_fields(payload),
    )
    value = {name: field for name, field in payload.items() if name != "lease"}
    for name in INTEGER_FIELDS:  # checked whole above: kept as integers (17011, not 17011.0)
        value[name] = int(value[name])
    return PrefillRank(Coords(dp, cp, tp, pp), topology, value)


def parse_route_query(param: Callable[[str], str | None]) -> Coords | None:
    """``GET`` or ``DELETE /route``'s four parameters: a rank, or ``None`` for the four ``-1``s (all).

    One missing or empty is the engines' :class:`MissingInputs`; one that is not
    a non-negative integer (other than the four ``-1``s together) a ``400``.
    """
    texts = [param(name) for name in ROUTE_PARAMS]
    if not all(texts):
        raise MissingInputs()
    if texts == ["-1"] * 4:
        return None
    values = []
    for name, text in zip(ROUTE_PARAMS, texts, strict=True):
        assert text is not None  # all() above
        if not (text.isascii() and text.isdigit()):
            raise BadRequest(
                f"The {name} parameter must be a non-negative integer (or all four -1), not {text!r}."
            )
        values.append(int(text))
    return Coords(*values)


def coords_of(name: str) -> dict[str, int]:
    """A rank record's coordinates from its name (:attr:`Coords.name`): ``{"dp": 0, "cp": 0, "tp": 1, "pp": 0}``."""
    return {part[:2]: int(part[2:]) for part in name.split("-")}


def not_ready_text(registered: int) -> str:
    """The engines' ``503`` text until the topology is complete (``registered``: distinct ranks)."""
    return f"Prefill server not fully registered yet ({registered} workers registered)."


def not_found_text(coords: Coords) -> str:
    """The engines' ``404`` text of a rank not registered once the topology is complete."""
    return f"Bootstrap info not found for {coords.says()}"


def encode_address(value: Mapping[str, Any]) -> bytes:
    """A rank's ``GET /route`` reply, as the engines' server writes it: ``{"rank_ip": ..., "rank_port": N}``."""
    return json.dumps({"rank_ip": value["rank_ip"], "rank_port": value["rank_port"]}).encode()
