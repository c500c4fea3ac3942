"""What SGLang's prefill and decode sides send to their bootstrap server, written from its protocol
(``register_to_bootstrap``, the parallel info read, the dp-rank query), for the prefill face's tests."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

ALL = "prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1"
"""decode's question for the parallel info."""


def rank_body(
    tp: int = 0,
    dp: int = 0,
    *,
    tp_size: int = 2,
    dp_size: int = 2,
    system_dp: tuple[int, int] = (0, 1),
    cp: tuple[int, int] = (0, 1),
    pp: tuple[int, int] = (0, 1),
    **extra: Any,
) -> dict[str, Any]:
    """A prefill rank's ``PUT /route`` body, as ``register_to_bootstrap`` sends it (DP attention by default:
    ``system_dp_size`` 1, the dp rank in ``attn_dp_rank``)."""
    return {
        "attn_tp_size": tp_size,
        "attn_tp_rank": tp,
        "attn_cp_size": cp[1],
        "attn_cp_rank": cp[0],
        "attn_dp_size": dp_size,
        "attn_dp_rank": dp,
        "pp_size": pp[1],
        "pp_rank": pp[0],
        "system_dp_size": system_dp[1],
        "system_dp_rank": system_dp[0],
        "rank_ip": f"10.0.0.{10 + tp}",
        "rank_port": 17000 + 10 * dp + tp,
        "page_size": 1,
        "kv_cache_dtype": "auto",
        "load_balance_method": "round_robin",
        **extra,
    }


def route(dp: int, cp: int, tp: int, pp: int) -> str:
    return f"prefill_dp_rank={dp}&prefill_cp_rank={cp}&target_tp_rank={tp}&target_pp_rank={pp}"


def _call(method: str, url: str, body: Any = None) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def register_to_bootstrap(bootstrap: str, body: dict[str, Any]) -> bool:
    """A prefill rank's registration, as the engine's: ``True`` on a 200 (it logs and runs on otherwise)."""
    return _call("PUT", f"http://{bootstrap}/route", body)[0] == 200


def ensure_parallel_info(bootstrap: str, wait: float | None = None) -> dict[str, Any] | None:
    """decode's read of the parallel info: its fields, or ``None`` on anything but a 200 (it asks again
    next cycle). ``wait``: aiobootstrap's one request instead of the engines' polling."""
    query = ALL if wait is None else f"{ALL}&wait={wait}"
    status, text = _call("GET", f"http://{bootstrap}/route?{query}")
    return json.loads(text) if status == 200 else None


def query_prefill_dp_ranks(bootstrap: str, rooms: list[int]) -> dict[str, int]:
    """decode's batch query of rooms' dp ranks: the reply, or ``{}`` on anything but a 200."""
    status, text = _call("POST", f"http://{bootstrap}/query_dp_ranks", {"bootstrap_rooms": rooms})
    return json.loads(text) if status == 200 else {}
