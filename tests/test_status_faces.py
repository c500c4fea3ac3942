"""``status`` shows what the faces hold: a namespace's prefill deployment (its ranks of its topology, the
missing ones, exit status 1 until it is complete) and its Mooncake engines."""

from __future__ import annotations

import json
import urllib.request

from .helpers.prefill import rank_body
from .helpers.tools import namespace as namespace  # the module's fixtures, shared
from .helpers.tools import tool
from .helpers.tools import url as url


def _put(url: str, namespace: str, body: dict[str, object]) -> None:
    request = urllib.request.Request(f"{url}/ns/{namespace}/route", json.dumps(body).encode(), method="PUT")
    with urllib.request.urlopen(request) as reply:
        assert reply.status == 200


def test_status_shows_the_prefill_deployment(url: str, namespace: str) -> None:
    for tp, dp in ((0, 0), (1, 0), (0, 1)):
        _put(url, namespace, rank_body(tp, dp))
    result = tool("status", "--url", url, "--namespace", namespace)
    assert (
        "prefill: 3 of 4 ranks registered (dp 2 x cp 1 x tp 2 x pp 1), missing: dp1-cp0-tp1-pp0"
        in result.stdout
    )
    assert result.returncode == 1
    _put(url, namespace, rank_body(1, 1))
    result = tool("status", "--url", url, "--namespace", namespace)
    assert "prefill: 4 of 4 ranks registered (dp 2 x cp 1 x tp 2 x pp 1)\n" in result.stdout


def test_status_shows_the_mooncake_engines(url: str, namespace: str) -> None:
    for key, value in (
        ("mooncake/rpc_meta/h:1", b'{"ip_or_host_name":"h","rpc_port":1}'),
        ("mooncake/ram/h:1", b"{}"),
    ):
        request = urllib.request.Request(f"{url}/ns/{namespace}/metadata?key={key}", value, method="PUT")
        with urllib.request.urlopen(request) as reply:
            assert reply.status == 200
    result = tool("status", "--url", url, "--namespace", namespace)
    assert "mooncake: 1 engine (1 with a segment), 2 keys" in result.stdout
