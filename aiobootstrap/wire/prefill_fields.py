"""The deployment-wide fields a prefill rank sends beyond those the server reads, carried back to decode in
the parallel info (SPEC section 13, as amended for SGLang 0.5.23). No I/O here.

SGLang's decode builds its ``PrefillServerInfo`` from every key of the
parallel info (``PrefillServerInfo(**reply)``): a key its own prefill never
sends breaks an older decode (an unexpected keyword), and a key its prefill
did send but the reply drops makes a newer decode run on a default without a
word. So the reply carries back every field the prefill side sent that the
server does not read itself, under its own name, with its value, and none it
did not send; a ``null`` is left out (as SGLang's server leaves out a
``null`` ``kv_layout``). A field is fixed by the first registration that
sends it, so a field the next SGLang release adds passes through with no
release of aiobootstrap. The six SGLang 0.5.23 sends (:data:`CHECKED`) are
checked for their type (a ``400`` naming the field); any other is kept as
sent.

A later rank that sends another ``decode_allocation_policy`` or
``dsv41_spec_layout`` than the deployment's is refused with SGLang's own
sentence (:data:`REFUSED`), compared as SGLang compares them (a field not
sent is its default: ``"early"``, ``null``); any other difference keeps the
first value (the server logs a ``WARNING`` naming both).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..exceptions import BadRequest

__all__ = [
    "CHECKED",
    "INTEGER_FIELDS",
    "NOT_PASSED",
    "REFUSED",
    "REQUIRED_FIELDS",
    "differing",
    "info_fields",
    "joined",
    "passed_fields",
    "refusal",
]

INTEGER_FIELDS = (
    "attn_tp_size",
    "attn_tp_rank",
    "attn_cp_size",
    "attn_cp_rank",
    "attn_dp_size",
    "attn_dp_rank",
    "pp_size",
    "pp_rank",
    "system_dp_size",
    "system_dp_rank",
    "rank_port",
    "page_size",
)
REQUIRED_FIELDS = (*INTEGER_FIELDS, "rank_ip", "kv_cache_dtype")
"""What a ``PUT /route`` body must hold (``register_to_bootstrap`` sends them all)."""

NOT_PASSED = frozenset(
    {
        # What the server reads of a rank: its place and sizes, its address, what the topology fixes.
        *REQUIRED_FIELDS,
        "load_balance_method",
        "lease",  # the registry's, not the engine's
        # The parallel info's own keys, which the server makes: a field of one of these names does not
        # replace them.
        "dp_size",
        "follow_bootstrap_room",
        "target_tp_rank",
        "target_tp_ranks",
        "target_cp_ranks",
        "target_pp_ranks",
        "required_dst_info_num",
        "required_prefill_response_num",
    }
)
"""The fields of a ``PUT /route`` body that are not passed through to the parallel info."""


def _port(value: Any) -> bool:
    """An integer from 1 to 65535 (``30000.0`` too, as JSON Schema counts integers; kept as ``30000``)."""
    whole = type(value) is int or (type(value) is float and value.is_integer())
    return whole and 1 <= value <= 65_535


CHECKED: dict[str, tuple[Callable[[Any], bool], str]] = {
    # In the order of SGLang 0.5.23's PrefillServerInfo, which its server's reply follows.
    "enable_dsa_cache_layer_split": (lambda value: isinstance(value, bool), "a boolean"),
    "dsv41_spec_layout": (lambda value: isinstance(value, dict), "an object"),
    "kv_layout": (lambda value: isinstance(value, str), "a string"),
    "decode_allocation_policy": (lambda value: isinstance(value, str) and bool(value), "a non-empty string"),
    "enable_kv_cache_sharding": (lambda value: isinstance(value, bool), "a boolean"),
    "prefill_http_port": (_port, "a port, an integer from 1 to 65535"),
}
"""The fields SGLang 0.5.23's ``register_to_bootstrap`` adds, each with its check and what it must be
(or ``null``, which is as if it were not sent)."""

REFUSED: dict[str, tuple[Any, str]] = {
    "decode_allocation_policy": ("early", "Inconsistent prefill allocation policies"),
    "dsv41_spec_layout": (None, "DeepSeek-V4.1 DSpark PD layout differs across prefill ranks"),
}
"""The fields every rank must agree on, each with SGLang's default for a rank that does not send it and
SGLang 0.5.23's sentence refusing a rank that differs."""

_SHOWN = 64
"""The most characters of a value a sentence shows."""


def passed_fields(payload: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The fields of ``payload`` passed through (not :data:`NOT_PASSED`, not ``null``), in the order sent;
    a :data:`CHECKED` one of the wrong type is a :class:`BadRequest` naming it."""
    passed = []
    for name, value in payload.items():
        if name in NOT_PASSED or value is None:
            continue
        checked = CHECKED.get(name)
        if checked is not None and not checked[0](value):
            raise BadRequest(f"The field {name} must be {checked[1]} or null, not {_shown(value)}.")
        passed.append((name, int(value) if name == "prefill_http_port" else value))
    return tuple(passed)


def _shown(value: Any) -> str:
    """``value`` as JSON, cut to :data:`_SHOWN` characters, ending ``...[N chars]`` when it was longer."""
    text = json.dumps(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}...[{len(text)} chars]"


def _named(name: str) -> str:
    """A field's name as a sentence (and the log) says it: as it is when it is a short identifier, else as
    :func:`_shown` shows a value (quoted, escaped, cut)."""
    return name if name.isidentifier() and len(name) <= _SHOWN else _shown(name)


def refusal(fixed: Mapping[str, Any], sent: Mapping[str, Any]) -> str | None:
    """SGLang's sentence, with both values, when ``sent`` (a rank's fields) differs from ``fixed`` (the
    deployment's) in a :data:`REFUSED` field; else ``None``."""
    for name, (default, sentence) in REFUSED.items():
        mine, theirs = fixed.get(name, default), sent.get(name, default)
        if mine != theirs:
            return (
                f"{sentence}: this rank's {name} is {_shown(theirs)} and the deployment's {_shown(mine)} "
                "(every rank of a deployment must agree; DELETE /route with all four -1 to start anew)."
            )
    return None


def joined(fixed: Mapping[str, Any], sent: Iterable[tuple[str, Any]]) -> dict[str, Any] | None:
    """The deployment's fields with those ``sent`` first (none of that name fixed yet) added; ``None`` when
    ``sent`` adds nothing (no write)."""
    added = {name: value for name, value in sent if name not in fixed}
    return {**fixed, **added} if added else None


def differing(fixed: Mapping[str, Any], sent: Iterable[tuple[str, Any]]) -> list[str]:
    """Each field ``sent`` with another value than the deployment keeps, said with both (for the WARNING)."""
    return [
        f"{_named(name)} {_shown(value)} (the deployment keeps {_shown(fixed[name])})"
        for name, value in sent
        if name in fixed and fixed[name] != value
    ]


def info_fields(fixed: Mapping[str, Any]) -> dict[str, Any]:
    """The deployment's fields as the parallel info carries them: SGLang 0.5.23's in its reply's order,
    then any other in the order they were first sent."""
    known = {name: fixed[name] for name in CHECKED if name in fixed}
    return {**known, **{name: value for name, value in fixed.items() if name not in CHECKED}}
