"""Mooncake's metadata protocol (SPEC section 14), both ways: its replies' exact texts, and a value kept
byte for byte in a record (a JSON object) and given back as it came. No I/O here.

A transfer engine counts only an exact ``200`` as success and reads a ``GET``
body as the JSON it last ``PUT``: a value is kept as its text when it is
UTF-8 (every engine's is) and as base64 otherwise, and served back as the
very bytes sent.
"""

from __future__ import annotations

import base64
from typing import Any

from ..exceptions import BadRequest

__all__ = [
    "DELETED",
    "DUPLICATE",
    "KEY_REQUIRED",
    "LEASE_HEADER",
    "METADATA",
    "METADATA_PATH",
    "MOONCAKE_LISTING_PATH",
    "NOT_FOUND",
    "UNCHANGED",
    "UPDATED",
    "decode_value",
    "encode_value",
    "is_rpc_meta",
]

METADATA = "metadata"
"""The record kind of a metadata key (a named record: its name is the key)."""
METADATA_PATH = "/metadata"
MOONCAKE_LISTING_PATH = "/mooncake"
"""aiobootstrap's own: a namespace's Mooncake engines, their RPC addresses and segments (the page, ``status``)."""

LEASE_HEADER = "X-Aiobootstrap-Lease"
"""A ``PUT``'s lease: the engines' body is the value itself, so the lease travels in a header."""

KEY_REQUIRED = "metadata key is required"
UPDATED = "metadata updated"
UNCHANGED = "metadata unchanged"
DELETED = "metadata deleted"
NOT_FOUND = "metadata not found"
DUPLICATE = "Duplicate rpc_meta key not allowed"
"""Mooncake's server's texts, which its engines log and a user greps for."""


def is_rpc_meta(key: str) -> bool:
    """Whether ``key`` is an engine's RPC entry (``mooncake/rpc_meta/<name>``), which is never taken over."""
    return "rpc_meta" in key


def encode_value(body: bytes) -> dict[str, Any]:
    """``body`` as a record keeps it: its text, or its base64 when it is not UTF-8."""
    try:
        return {"text": body.decode()}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(body).decode()}


def decode_value(value: dict[str, Any]) -> bytes:
    """The bytes a record keeps (:func:`encode_value`'s inverse)."""
    text = value.get("text")
    if isinstance(text, str):
        return text.encode()
    encoded = value.get("base64")
    if isinstance(encoded, str):
        return base64.b64decode(encoded)
    raise BadRequest("The metadata record holds no value.")  # written by something else than this face
