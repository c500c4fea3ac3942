"""Payloads shaped like real transfer-engine infos."""

from __future__ import annotations

import json
import random
from typing import Any

__all__ = ["registration", "weights"]

_PARTS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
    "input_layernorm",
)


def weights(tensors: int, seed: int = 0) -> dict[str, Any]:
    """``tensors`` entries of ``name: [address, numel, element_size]`` (about 56 bytes each)."""
    rng = random.Random(seed)
    out: dict[str, Any] = {}
    for index in range(tensors):
        layer, part = divmod(index, len(_PARTS))
        name = f"layers.{layer}.{_PARTS[part]}.weight"
        out[name] = [rng.randrange(1 << 36, 1 << 40), rng.randrange(1 << 10, 1 << 22), 2]
    return out


def registration(rank: int, weights_info_dict: dict[str, Any]) -> bytes:
    body = {
        "rank": rank,
        "transfer_engine_info": {
            "session_id": f"10.0.{rank >> 8 & 255}.{rank & 255}:18000",
            "weights_info_dict": weights_info_dict,
        },
    }
    return json.dumps(body, separators=(",", ":")).encode()
