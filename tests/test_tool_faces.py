"""The tools with the faces' own records (issue 41 items 14 and 17): ``wait`` for a prefill deployment where
no world size is known, ``get --key`` for a Mooncake metadata key, ``status`` of a namespace of another face
(no empty engine-info heading, counts in the singular, a vLLM line), the tools' server from
``AIOBOOTSTRAP_URL``, and a refused token's remedy."""

from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.request

import pytest

from aiobootstrap import ThreadedBootstrapServer

from .helpers.prefill import rank_body
from .helpers.tools import GUARD, assert_one_line_error, command, tool
from .helpers.tools import namespace as namespace  # the module's fixtures, shared
from .helpers.tools import url as url

FOUR = ((0, 0), (1, 0), (0, 1), (1, 1))
"""The (tp, dp) ranks of rank_body's deployment: dp 2 x tp 2."""


def _send(url: str, method: str, path: str, body: bytes) -> None:
    with urllib.request.urlopen(urllib.request.Request(url + path, body, method=method)) as reply:
        assert reply.status == 200


def _prefill(url: str, namespace: str, tp: int, dp: int) -> None:
    _send(url, "PUT", f"/ns/{namespace}/route", json.dumps(rank_body(tp, dp)).encode())


def _metadata(url: str, namespace: str, key: str, value: bytes) -> None:
    _send(url, "PUT", f"/ns/{namespace}/metadata?key={key}", value)


# -- wait ---------------------------------------------------------------------------------------------


def test_wait_without_a_world_size_waits_for_the_namespaces_prefill_deployment(
    url: str, namespace: str
) -> None:
    """No --world-size and none on the server, but a prefill topology: wait waits for it, not refusing."""
    _prefill(url, namespace, 0, 0)
    late = tool("wait", "--url", url, "--namespace", namespace, "--timeout", "0.3")
    assert_one_line_error(late, 1, "the prefill deployment is not complete after 0.3s: Prefill server not")
    assert "Missing 3 of 4 prefill ranks: dp0-cp0-tp1-pp0, dp1-cp0-tp0-pp0, dp1-cp0-tp1-pp0." in late.stderr
    for tp, dp in FOUR[1:]:
        _prefill(url, namespace, tp, dp)
    done = tool("wait", "--url", url, "--namespace", namespace, "--timeout", "5")
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout
        == f"all 4 prefill ranks registered (dp 2 x cp 1 x tp 2 x pp 1) in namespace {namespace}\n"
    )


async def test_wait_kind_prefill_rank_waits_for_the_first_rank_too(url: str, namespace: str) -> None:
    """--kind prefill_rank in an empty namespace: the topology is awaited with the rest (an init container
    started before the prefill side), and the wait ends when the last rank registers."""
    waiting = asyncio.create_task(
        asyncio.to_thread(
            tool, "wait", "--url", url, "--namespace", namespace, "--kind", "prefill_rank", "--timeout", "60"
        )
    )
    for tp, dp in FOUR:
        await asyncio.to_thread(_prefill, url, namespace, tp, dp)
    result = await asyncio.wait_for(waiting, GUARD)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("all 4 prefill ranks registered")


def test_wait_without_any_size_says_both_ways_out(url: str, namespace: str) -> None:
    result = tool("wait", "--url", url, "--namespace", namespace, "--timeout", "1")
    assert_one_line_error(
        result, 2, "give wait --world-size N (or --kind prefill_rank for a prefill deployment"
    )
    both = tool("wait", "--url", url, "--namespace", namespace, "--kind", "prefill_rank", "--world-size", "2")
    assert_one_line_error(both, 2, "--world-size and --role do not apply to --kind prefill_rank")


def _vllm(url: str, namespace: str, tp: int, dp: int = 0) -> None:
    worker = {
        "engine_id": f"e-{dp}",
        "dp_rank": dp,
        "tp_rank": tp,
        "pp_rank": 0,
        "addr": f"tcp://h:{5000 + tp}",
    }
    _send(url, "POST", f"/ns/{namespace}/register", json.dumps(worker).encode())


def test_wait_for_a_vllm_deployment_of_the_sizes_given(url: str, namespace: str) -> None:
    """vLLM's workers do not say their deployment's sizes: without them wait says which to give; with
    --tp-size it waits for the deployment, and a timeout is status 1 with the server's sentence."""
    _vllm(url, namespace, 0)
    unsized = tool("wait", "--url", url, "--namespace", namespace, "--timeout", "1")
    assert_one_line_error(unsized, 2, "the namespace holds vLLM workers, which do not say their deployment's")
    late = tool("wait", "--url", url, "--namespace", namespace, "--tp-size", "2", "--timeout", "0.3")
    assert_one_line_error(
        late,
        1,
        "gave up after 0.3s: The vLLM deployment is not complete: dp_rank=0 lacks tp_rank=1 pp_rank=0.",
    )
    _vllm(url, namespace, 1)
    done = tool("wait", "--url", url, "--namespace", namespace, "--tp-size", "2", "--dp-size", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"2 vLLM workers registered on 1 dp rank (tp 2, dp 1) in namespace {namespace}\n"


def test_wait_refuses_sizes_and_kinds_that_do_not_go_together(url: str, namespace: str) -> None:
    for args, text in (
        (("--kind", "vllm_worker"), "--kind vllm_worker needs the deployment's sizes: give --tp-size N"),
        (("--tp-size", "2", "--kind", "parallelism_config"), "are a vLLM deployment's (--kind vllm_worker)"),
        (
            ("--tp-size", "2", "--world-size", "2"),
            "--world-size and --role do not apply to --kind vllm_worker",
        ),
        (("--pp-size", "2"), "--pp-size needs --tp-size"),
    ):
        assert_one_line_error(tool("wait", "--url", url, "--namespace", namespace, *args), 2, text)


# -- get --key ----------------------------------------------------------------------------------------


def test_get_key_prints_a_metadata_value_and_says_when_there_is_none(url: str, namespace: str) -> None:
    key = "mooncake/ram/10.0.0.7:18000"
    value = b'{"buffers":[],"protocol":"tcp"}'
    missing = tool("get", "--url", url, "--namespace", namespace, "--key", key)
    assert_one_line_error(missing, 1, f"no value under key {key}")
    _metadata(url, namespace, key, value)
    for extra in ((), ("--kind", "metadata")):
        result = tool("get", "--url", url, "--namespace", namespace, "--key", key, *extra)
        assert result.returncode == 0, result.stderr
        assert result.stdout == value.decode()
    newer = tool("get", "--url", url, "--namespace", namespace, "--key", key, "--after", "1", "--wait", "0.2")
    assert_one_line_error(newer, 1, f"no value under key {key} newer than version 1 after 0.2s")


def test_get_key_refuses_what_does_not_apply(url: str, namespace: str) -> None:
    for args, text in (
        (("--kind", "metadata"), "--key is required for --kind metadata"),
        (("--key", "k", "--rank", "0"), "--rank does not apply to a metadata --key"),
        (("--key", "k", "--role", "draft"), "--role does not apply to a metadata --key"),
        (("--key", "k", "--kind", "parallelism_config"), "--key does not apply to --kind parallelism_config"),
    ):
        assert_one_line_error(tool("get", "--url", url, "--namespace", namespace, *args), 2, text)


def test_get_key_writes_the_bytes_as_stored_and_waits_for_them(url: str, namespace: str) -> None:
    """A real process: stdout is the value byte for byte (not UTF-8 here), once a --wait sees it put."""
    key = "mooncake/rpc_meta/h:1"
    value = b'\xff\x00{"rpc_port": 1}\n'
    getting = subprocess.Popen(
        command("get", "--url", url, "--namespace", namespace, "--key", key, "--wait", "60"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _metadata(url, namespace, key, value)
    out, err = getting.communicate(timeout=GUARD)
    assert getting.returncode == 0, err
    assert out == value


# -- status -------------------------------------------------------------------------------------------


def test_status_of_a_prefill_namespace_shows_no_empty_engine_info_heading(url: str, namespace: str) -> None:
    for tp, dp in FOUR:
        _prefill(url, namespace, tp, dp)
    result = tool("status", "--url", url, "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == ["prefill: 4 of 4 ranks registered (dp 2 x cp 1 x tp 2 x pp 1)"]
    asked = tool("status", "--url", url, "--namespace", namespace, "--kind", "transfer_engine_info")
    assert "transfer_engine_info, role target: 0 registered" in asked.stdout.splitlines()


def test_status_of_a_mooncake_namespace_counts_in_the_singular(url: str, namespace: str) -> None:
    _metadata(url, namespace, "mooncake/rpc_meta/h:1", b'{"ip_or_host_name":"h","rpc_port":1}')
    result = tool("status", "--url", url, "--namespace", namespace)
    assert result.stdout.splitlines()[1:] == ["mooncake: 1 engine (0 with a segment), 1 key"]


def test_status_shows_a_vllm_deployment(url: str, namespace: str) -> None:
    for tp in (0, 1):
        worker = {
            "engine_id": "e-1",
            "dp_rank": 0,
            "tp_rank": tp,
            "pp_rank": 0,
            "addr": f"tcp://h:{5000 + tp}",
        }
        _send(url, "POST", f"/ns/{namespace}/register", json.dumps(worker).encode())
    result = tool("status", "--url", url, "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == ["vllm: 2 workers on 1 dp rank (1 engine: e-1)"]


def test_an_empty_namespace_still_shows_the_engine_info_heading(url: str, namespace: str) -> None:
    """Nothing of any face: the default kind's heading stays, where to look (README's first status)."""
    lines = tool("status", "--url", url, "--namespace", namespace).stdout.splitlines()
    assert lines[1:] == [
        "transfer_engine_info, role target: 0 registered",
        "encoder_urls: 0 listed, version 0",
    ]


# -- the environment ----------------------------------------------------------------------------------


def test_the_tools_server_comes_from_aiobootstrap_url(
    url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--url, else AIOBOOTSTRAP_URL (a namespace in its path too), else the default; a bad one is one line."""
    _prefill(url, namespace, 0, 0)
    monkeypatch.setenv("AIOBOOTSTRAP_URL", url)
    assert "prefill: 1 of 4" in tool("status", "--namespace", namespace).stdout
    monkeypatch.setenv("AIOBOOTSTRAP_URL", f"{url}/ns/{namespace}")
    assert "prefill: 1 of 4" in tool("status").stdout
    monkeypatch.setenv("AIOBOOTSTRAP_URL", "http://127.0.0.1:9")  # --url wins
    assert "prefill: 1 of 4" in tool("status", "--url", url, "--namespace", namespace).stdout
    monkeypatch.setenv("AIOBOOTSTRAP_URL", "127.0.0.1:7000")
    assert_one_line_error(
        tool("status"), 2, "AIOBOOTSTRAP_URL='127.0.0.1:7000' is not an http:// or https:// URL"
    )


def test_a_refused_token_names_where_a_token_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIOBOOTSTRAP_AUTH_TOKEN", raising=False)
    server = ThreadedBootstrapServer("127.0.0.1", 0, auth_token="s3cret")
    try:
        missing = tool("status", "--url", server.url)
        assert_one_line_error(missing, 2, "give one with --token or AIOBOOTSTRAP_AUTH_TOKEN")
        wrong = tool("status", "--url", server.url, "--token", "nope")
        assert_one_line_error(wrong, 2, "(the --token or AIOBOOTSTRAP_AUTH_TOKEN given)")
        monkeypatch.setenv("AIOBOOTSTRAP_AUTH_TOKEN", "s3cret")
        assert tool("status", "--url", server.url).returncode == 0
    finally:
        server.close()
