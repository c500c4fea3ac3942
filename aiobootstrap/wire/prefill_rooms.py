"""SGLang's bootstrap rooms (PD disaggregation, SPEC section 13): which prefill dp rank a request's room
went to, as ``/register_dp_rank`` stores it and ``/query_dp_ranks`` asks for it. No I/O here."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import BadRequest
from .prefill import whole

__all__ = ["MAX_ROOM", "MAX_ROOMS_ASKED", "encode_rooms", "parse_room", "parse_rooms"]

MAX_ROOMS_ASKED = 65_536
"""The most rooms one ``/query_dp_ranks`` may ask: what one request makes the server read stays bounded."""

MAX_ROOM = 2**64 - 1
"""The largest room: the engines draw rooms below 2**63; a room is a 64-bit number on every side."""


def _room(value: object, what: str) -> int:
    number = whole(value)
    if number is None or not 0 <= number <= MAX_ROOM:
        raise BadRequest(f"{what} must be an integer from 0 to 2**64 - 1, not {json.dumps(value)[:64]}.")
    return number


def parse_room(payload: Mapping[str, Any]) -> tuple[int, int]:
    """``POST /register_dp_rank``'s body: the room and its dp rank."""
    for name in ("bootstrap_room", "dp_rank"):
        if name not in payload:
            raise BadRequest(f"The field {name} is missing.")
    return _room(payload["bootstrap_room"], "The field bootstrap_room"), _room(
        payload["dp_rank"], "The field dp_rank"
    )


def parse_rooms(payload: Mapping[str, Any]) -> list[int]:
    """``POST /query_dp_ranks``' body: the rooms asked, at most :data:`MAX_ROOMS_ASKED`."""
    rooms = payload.get("bootstrap_rooms")
    if not isinstance(rooms, list):
        raise BadRequest("The field bootstrap_rooms must be a list of rooms.")
    if len(rooms) > MAX_ROOMS_ASKED:
        raise BadRequest(
            f"The field bootstrap_rooms holds {len(rooms)} rooms: at most {MAX_ROOMS_ASKED} at once."
        )
    return list(dict.fromkeys(_room(room, "Each of bootstrap_rooms") for room in rooms))


def encode_rooms(found: Sequence[tuple[int, int]]) -> bytes:
    """``/query_dp_ranks``' reply: the known rooms, keys as strings, as the engines' server writes it."""
    return json.dumps({str(room): dp_rank for room, dp_rank in found}).encode()
