"""The operator tools (get, register, status, wait) against a real server subprocess.

One server serves the module (per xdist worker); each test works in a namespace
of its own, so tests never see each other's ranks. A tool runs through the
console script's ``main()`` in this process, which says all a subprocess would
(its exit status and what it printed; an escaping exception fails the test)
without a Python and aiohttp start-up per call. A tool that must outlive the
call (``get --wait``, ``wait``, ``wait`` on a terminal) runs as a real
``python -m aiobootstrap`` subprocess, as does ``serve``.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from pytest_aiohttp import AiohttpServer

from aiobootstrap import ServerConfig, ThreadedBootstrapServer, create_app
from aiobootstrap.cli.tools import format_age

from .helpers.tools import GUARD, assert_one_line_error, command, tool
from .helpers.tools import namespace as namespace  # the module's fixtures, shared
from .helpers.tools import url as url

_POLL = 0.005
"""Seconds between two looks at a subprocess server's metrics: a busy loop would take the CPU
that the waiting tool's subprocess needs to start."""


@pytest.fixture
def weights(tmp_path: Path) -> Path:
    path = tmp_path / "weights.json"
    path.write_text(json.dumps({"layer.0": {"ptr": 1234, "size": 4096}}))
    return path


def parked(url: str, namespace: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=GUARD) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "aiobootstrap_parked_waiters" and sample.labels["namespace"] == namespace:
                return sample.value
    return 0.0


def until_parked(url: str, namespace: str) -> None:
    """Return once the server reports a get parked in ``namespace``."""
    deadline = time.monotonic() + GUARD
    while parked(url, namespace) < 1:
        assert time.monotonic() < deadline, "the waiting tool never parked"
        time.sleep(_POLL)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def register(url: str, namespace: str, rank: int, weights: Path, session_id: str = "") -> None:
    result = tool(
        "register", "--url", url, "--namespace", namespace, "--rank", str(rank),
        "--session-id", session_id or f"10.0.0.{rank}:18000", "--weights-file", str(weights),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


# -- get and register ---------------------------------------------------


def test_register_then_get_prints_the_info_as_json(url: str, namespace: str, weights: Path) -> None:
    """register publishes the weights file's object; get prints rank, session id, weights and version."""
    result = tool(
        "register", "--url", url, "--namespace", namespace, "--rank", "3",
        "--session-id", "10.0.0.7:18000", "--weights-file", str(weights),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "registered rank 3" in result.stdout
    result = tool("get", "--url", url, "--namespace", namespace, "--rank", "3")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["rank"] == 3
    assert info["session_id"] == "10.0.0.7:18000"
    assert info["weights_info_dict"] == {"layer.0": {"ptr": 1234, "size": 4096}}
    assert info["version"] >= 1


def test_register_reads_weights_from_standard_input(url: str, namespace: str) -> None:
    """--weights-file - reads the JSON object from standard input."""
    result = tool(
        "register", "--url", url, "--namespace", namespace, "--rank", "0",
        "--session-id", "s", "--weights-file", "-", stdin='{"k": [1, 2]}',
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    info = json.loads(tool("get", "--url", url, "--namespace", namespace, "--rank", "0").stdout)
    assert info["weights_info_dict"] == {"k": [1, 2]}


def test_get_of_an_absent_rank_exits_1(url: str, namespace: str) -> None:
    """A rank not registered: status 1, the server's detail on one line, nothing on stdout."""
    assert_one_line_error(
        tool("get", "--url", url, "--namespace", namespace, "--rank", "9"),
        1,
        "No transfer engine info for rank 9",
    )


def test_get_after_a_version_says_there_is_nothing_newer(url: str, namespace: str, weights: Path) -> None:
    """get --after V of a registered rank with nothing newer says so, not that the rank is absent."""
    register(url, namespace, 3, weights)
    assert_one_line_error(
        tool("get", "--url", url, "--namespace", namespace, "--rank", "3", "--after", "1000"),
        1,
        "No transfer engine info for rank 3 newer than version 1000",
    )


def test_a_reader_that_stops_early_ends_the_tool_without_a_traceback(url: str, namespace: str) -> None:
    """status | head: the reader gone is exit status 141 (as a SIGPIPE'd process), nothing on stderr."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the tool writes a byte
    try:
        done = subprocess.run(
            command("status", "--url", url, "--namespace", namespace),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=GUARD,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


def test_get_with_wait_returns_once_the_rank_registers(url: str, namespace: str, weights: Path) -> None:
    """get --wait parks on the server and prints the info when the rank registers."""
    getter = subprocess.Popen(
        command("get", "--url", url, "--namespace", namespace, "--rank", "1", "--wait", str(GUARD)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    until_parked(url, namespace)
    register(url, namespace, 1, weights, "late")
    out, err = getter.communicate(timeout=GUARD)
    assert getter.returncode == 0, err
    assert json.loads(out)["session_id"] == "late"


# -- status -------------------------------------------------------------


def test_status_prints_a_table_and_the_missing_ranks(url: str, namespace: str, weights: Path) -> None:
    """status lists, per kind, rank, session id, version and age, and with --world-size the missing ranks:
    then it exits 1; a kind that holds nothing (parallelism config here) is left out unless asked."""
    for rank in (0, 1, 3):
        register(url, namespace, rank, weights)
    result = tool("status", "--url", url, "--namespace", namespace, "--world-size", "6")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"namespace {namespace}, version 3, 0 waiting"
    assert lines[1] == "transfer_engine_info, role target: 3 registered of world size 6"
    assert lines[2].split() == ["RANK", "SESSION", "ID", "VERSION", "AGE"]
    assert [line.split()[:2] for line in lines[3:6]] == [
        ["0", "10.0.0.0:18000"],
        ["1", "10.0.0.1:18000"],
        ["3", "10.0.0.3:18000"],
    ]
    assert lines[6:] == ["  missing: 2,4-5", "encoder_urls: 0 listed, version 0"]
    for rank in (2, 4, 5):
        register(url, namespace, rank, weights)
    assert tool("status", "--url", url, "--namespace", namespace, "--world-size", "6").returncode == 0


def test_status_names_who_waits_for_a_missing_rank(url: str, namespace: str, weights: Path) -> None:
    """A get parked on missing rank 2: status says so beside the missing ranks."""
    register(url, namespace, 0, weights)
    getter = subprocess.Popen(
        command("get", "--url", url, "--namespace", namespace, "--rank", "2", "--wait", str(GUARD)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        until_parked(url, namespace)
        result = tool("status", "--url", url, "--namespace", namespace, "--world-size", "4")
        assert "  missing: 1-3 (1 waiting on 2)" in result.stdout.splitlines(), result.stdout
    finally:
        register(url, namespace, 2, weights)
        getter.communicate(timeout=GUARD)


def test_status_warns_when_its_world_size_is_not_the_servers(weights: Path) -> None:
    """--world-size that disagrees with the server's: one warning line, and the exit status by the asked one."""
    server = ThreadedBootstrapServer("127.0.0.1", 0, world_size=2)
    try:
        register(server.url, "default", 0, weights)
        register(server.url, "default", 1, weights)
        result = tool("status", "--url", server.url, "--world-size", "4", "--kind", "transfer_engine_info")
        assert result.returncode == 1
        assert result.stderr == "warning: --world-size 4 differs from the server's world size 2\n"
        assert "  missing: 2-3" in result.stdout.splitlines()
        assert tool("status", "--url", server.url).returncode == 0
        waited = tool("wait", "--url", server.url, "--timeout", "5")  # the server's world size
        assert waited.returncode == 0, waited.stderr
        assert waited.stdout == "all 2 ranks registered in namespace default\n"
    finally:
        server.close()


def test_status_of_an_empty_namespace_names_the_near_one(url: str, namespace: str, weights: Path) -> None:
    """A mistyped --namespace: status says it holds nothing and names the nearest namespace there is."""
    register(url, namespace, 0, weights)
    result = tool("status", "--url", url, "--namespace", namespace + "x")
    assert result.returncode == 0
    assert f"namespace {namespace}x holds nothing" in result.stderr
    assert f"(did you mean {namespace}?)" in result.stderr


def test_status_namespaces_lists_every_namespace(url: str, namespace: str, weights: Path) -> None:
    """status --namespaces prints one line per namespace of the server, with its figures."""
    register(url, namespace, 0, weights)
    register(url, namespace, 1, weights)
    result = tool("status", "--url", url, "--namespaces")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{len(lines) - 1} namespaces"
    assert f"  {namespace}: version 2, 2 ranks registered, 0 waiting, 0 encoder URLs" in lines[1:]


def test_status_without_a_world_size_lists_only(url: str, namespace: str) -> None:
    """Without a known world size there is no missing line; an empty namespace is headings only."""
    result = tool("status", "--url", url, "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"namespace {namespace}, version 0, 0 waiting",
        "transfer_engine_info, role target: 0 registered",
        "encoder_urls: 0 listed, version 0",
    ]


def test_status_never_prints_control_characters(url: str, namespace: str, weights: Path) -> None:
    """A session id holding terminal escapes is shown escaped, so it cannot rewrite the operator's screen."""
    register(url, namespace, 0, weights, "evil\x1b[2J\rid")
    result = tool("status", "--url", url, "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert "\r" not in result.stdout
    assert "'evil\\x1b[2J\\rid'" in result.stdout


# -- wait ---------------------------------------------------------------


def test_wait_exits_0_once_every_rank_registered(url: str, namespace: str, weights: Path) -> None:
    """wait blocks while ranks are missing and exits 0 when the last one registers."""
    waiter = subprocess.Popen(
        command("wait", "--url", url, "--namespace", namespace, "--world-size", "2", "--timeout", str(GUARD)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    register(url, namespace, 0, weights)
    until_parked(url, namespace)
    assert waiter.poll() is None
    register(url, namespace, 1, weights)
    out, err = waiter.communicate(timeout=GUARD)
    assert waiter.returncode == 0, err
    assert out == f"all 2 ranks registered in namespace {namespace}\n"


def test_wait_that_times_out_exits_1_naming_the_missing(url: str, namespace: str, weights: Path) -> None:
    """When the timeout runs out first: status 1 and the ranks still missing."""
    register(url, namespace, 1, weights)
    result = tool("wait", "--url", url, "--namespace", namespace, "--world-size", "4", "--timeout", "0.1")
    assert_one_line_error(result, 1, "3 of 4 ranks still missing after 0.1s: 0,2-3")


def test_wait_shows_progress_on_a_terminal(url: str, namespace: str, weights: Path) -> None:
    """With standard error on a terminal, wait keeps one line saying how many ranks have registered, and which not."""
    register(url, namespace, 0, weights)
    primary, secondary = pty.openpty()
    try:
        waiter = subprocess.Popen(
            command("wait", "--url", url, "--namespace", namespace, "--world-size", "2",
                    "--timeout", str(GUARD)),
            stdout=subprocess.PIPE, stderr=secondary, text=True,
        )  # fmt: skip
        os.close(secondary)
        seen = ""
        deadline = time.monotonic() + GUARD
        while "1/2 ranks registered, missing 1" not in seen:
            assert time.monotonic() < deadline, seen
            ready, _, _ = select.select([primary], [], [], GUARD)
            assert ready, seen
            seen += os.read(primary, 1024).decode()
        register(url, namespace, 1, weights)
        out, _ = waiter.communicate(timeout=GUARD)
    finally:
        os.close(primary)
    assert waiter.returncode == 0
    assert out.startswith("all 2 ranks registered")


# -- kinds and roles ------------------------------------------------------


def send(url: str, namespace: str, method: str, route: str, body: dict[str, Any]) -> None:
    """One request to the server, as an engine would send it (the tools register transfer-engine info only)."""
    request = urllib.request.Request(
        f"{url}/ns/{namespace}{route}",
        data=json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=GUARD) as reply:
        assert reply.status == 200


def register_config(
    url: str, namespace: str, rank: int, config: dict[str, Any], role: str = "target"
) -> None:
    body = {"rank": rank, "parallelism_config": config, "role": role}
    send(url, namespace, "PUT", "/register_parallelism_config", body)


def test_get_of_each_kind_and_role(url: str, namespace: str, weights: Path) -> None:
    """get --kind parallelism_config and --role draft print their own record; NIXL info is printed whole."""
    register_config(url, namespace, 2, {"tp_size": 8})
    register_config(url, namespace, 2, {"tp_size": 1}, role="draft")
    nixl = {"backend": "nixl", "agent_name": "a", "agent_metadata": "bWV0YQ==", "weights_info_dict": {}}
    send(url, namespace, "PUT", "/register_transfer_engine_info", {"rank": 2, "transfer_engine_info": nixl})
    common = ("--url", url, "--namespace", namespace, "--rank", "2")
    result = tool("get", *common, "--kind", "parallelism_config")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert (shown["rank"], shown["parallelism_config"]) == (2, {"tp_size": 8})
    assert "role" not in shown
    result = tool("get", *common, "--kind", "parallelism_config", "--role", "draft")
    assert json.loads(result.stdout)["parallelism_config"] == {"tp_size": 1}
    assert json.loads(result.stdout)["role"] == "draft"
    shown = json.loads(tool("get", *common).stdout)
    assert {key: shown[key] for key in nixl} == nixl
    assert "session_id" not in shown
    assert_one_line_error(tool("get", *common, "--role", "draft"), 1, "No transfer engine info for rank 2")
    assert_one_line_error(
        tool("get", "--url", url, "--namespace", namespace, "--rank", "9", "--kind", "parallelism_config"),
        1,
        "No parallelism config for rank 9",
    )


def test_get_parallelism_config_with_wait_returns_once_it_registers(url: str, namespace: str) -> None:
    """get --kind parallelism_config --wait parks and prints the config when it registers."""
    getter = subprocess.Popen(
        command("get", "--url", url, "--namespace", namespace, "--rank", "1", "--kind", "parallelism_config",
                "--role", "draft", "--wait", str(GUARD)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    until_parked(url, namespace)
    register_config(url, namespace, 1, {"late": True}, role="draft")
    out, err = getter.communicate(timeout=GUARD)
    assert getter.returncode == 0, err
    assert json.loads(out)["parallelism_config"] == {"late": True}


def test_get_encoder_urls_prints_the_list_and_waits_for_a_change(url: str, namespace: str) -> None:
    """get --kind encoder_urls prints the list and its version; with --after and --wait, the next list."""
    send(url, namespace, "POST", "/register_encoder_url", {"url": "http://e0"})
    result = tool("get", "--url", url, "--namespace", namespace, "--kind", "encoder_urls")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"encoder_urls": ["http://e0"], "version": 1}
    getter = subprocess.Popen(
        command("get", "--url", url, "--namespace", namespace, "--kind", "encoder_urls", "--after", "1",
                "--wait", str(GUARD)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    until_parked(url, namespace)
    send(url, namespace, "POST", "/register_encoder_url", {"url": "http://e1"})
    out, err = getter.communicate(timeout=GUARD)
    assert getter.returncode == 0, err
    assert json.loads(out) == {"encoder_urls": ["http://e0", "http://e1"], "version": 2}
    unchanged = tool(
        "get",
        "--url",
        url,
        "--namespace",
        namespace,
        "--kind",
        "encoder_urls",
        "--after",
        "2",
        "--wait",
        "0.05",
    )
    assert_one_line_error(unchanged, 1, "did not change after version 2 in 0.05s (it is at version 2)")


def test_wait_for_a_kind_and_role(url: str, namespace: str) -> None:
    """wait --kind parallelism_config --role draft exits 0 once those records are in, 1 naming the missing."""
    args = ("wait", "--url", url, "--namespace", namespace, "--world-size", "2",
            "--kind", "parallelism_config", "--role", "draft")  # fmt: skip
    waiter = subprocess.Popen(
        command(*args, "--timeout", str(GUARD)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    register_config(url, namespace, 0, {}, role="draft")
    register_config(url, namespace, 1, {})  # the target's: not what is waited for
    until_parked(url, namespace)
    assert waiter.poll() is None
    register_config(url, namespace, 1, {}, role="draft")
    out, err = waiter.communicate(timeout=GUARD)
    assert waiter.returncode == 0, err
    assert out == f"all 2 ranks registered parallelism_config of role draft in namespace {namespace}\n"
    args = (*args[:6], "3", *args[7:])
    assert_one_line_error(tool(*args, "--timeout", "0.05"), 1, "1 of 3 ranks still missing after 0.05s: 2")


def test_status_per_kind_and_role(url: str, namespace: str, weights: Path) -> None:
    """status --kind/--role show each kind and role asked: counts, tagged backends, missing, encoder URLs."""
    register(url, namespace, 0, weights)
    nixl = {"backend": "nixl", "agent_name": "a", "agent_metadata": "", "weights_info_dict": {}}
    body = {"rank": 1, "role": "draft", "transfer_engine_info": nixl}
    send(url, namespace, "PUT", "/register_transfer_engine_info", body)
    register_config(url, namespace, 1, {}, role="draft")
    send(url, namespace, "POST", "/register_encoder_url", {"url": "http://e\x1b[2J"})
    result = tool(
        "status", "--url", url, "--namespace", namespace, "--world-size", "2",
        "--role", "target", "--role", "draft",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # rank 1 of target and rank 0 of draft are missing
    lines = result.stdout.splitlines()
    assert lines[0] == f"namespace {namespace}, version 4, 0 waiting"
    assert "transfer_engine_info, role target: 1 registered of world size 2" in lines
    assert "transfer_engine_info, role draft: 1 registered of world size 2" in lines
    draft = lines.index("transfer_engine_info, role draft: 1 registered of world size 2")
    assert lines[draft + 1].split() == ["RANK", "SESSION", "ID", "BACKEND", "VERSION", "AGE"]
    assert lines[draft + 2].split()[:3] == ["1", "-", "nixl"]
    assert lines[draft + 3] == "  missing: 0"
    configs = lines.index("parallelism_config, role draft: 1 registered of world size 2")
    assert lines[configs + 1].split() == ["RANK", "VERSION", "AGE"]
    assert lines[configs + 3] == "  missing: 0"
    assert lines[-2:] == ["encoder_urls: 1 listed, version 4", "  'http://e\\x1b[2J'"]
    only = tool("status", "--url", url, "--namespace", namespace, "--kind", "parallelism_config")
    assert only.stdout.splitlines()[1:] == ["parallelism_config, role target: 0 registered"]


# -- failures: one line, a status, no traceback ---------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("get", "--rank", "0"),
        ("status",),
        ("wait", "--world-size", "2", "--timeout", "0"),
        ("register", "--rank", "0", "--session-id", "s", "--weights-file", "-", "--timeout", "0"),
    ],
    ids=["get", "status", "wait", "register"],
)
def test_a_server_that_is_down_is_one_line_and_status_3(args: tuple[str, ...]) -> None:
    """Every tool reports an unreachable server in one line with status 3."""
    port = free_port()
    result = tool(*args, "--url", f"http://127.0.0.1:{port}", stdin="{}")
    assert_one_line_error(
        result, 3, f"could not be reached: cannot connect to 127.0.0.1:{port}: Connection refused"
    )
    # aiohttp's own words name its TLS setting ("ssl:default") even for http://, as if TLS were the trouble.
    assert "ssl" not in result.stderr


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("get", "--rank", "-1"), "is not a rank"),
        (("get", "--rank", "x"), "is not a rank"),
        (("get", "--rank", "0", "--wait", "nan"), "is not a non-negative number"),
        (("wait", "--world-size", "0"), "is not a positive integer"),
        (("get", "--rank", "0", "--namespace", "a/b"), "Invalid namespace"),
        (("get",), "--rank is required for --kind transfer_engine_info"),
        (("get", "--kind", "parallelism_config"), "--rank is required for --kind parallelism_config"),
        (("get", "--kind", "encoder_urls", "--rank", "0"), "--rank does not apply to --kind encoder_urls"),
        (("get", "--kind", "encoder_urls", "--role", "draft"), "--role does not apply"),
        (("get", "--kind", "nope", "--rank", "0"), "invalid choice: 'nope'"),
        (("get", "--rank", "0", "--role", ""), "a role is a non-empty name"),
        (("get", "--rank", "0", "--after", "-1"), "is not a version"),
        (("wait", "--world-size", "2", "--kind", "encoder_urls"), "invalid choice"),
        (("status", "--role", ""), "a role is a non-empty name"),
        (("status", "--kind", "x"), "invalid choice"),
        (
            ("frobnicate",),
            "unknown command 'frobnicate': give one of get, register, status, wait, watch, serve",
        ),
        (("stat",), "unknown command 'stat'"),
        (("get", "--rank", "0", "--bogus"), "python -m aiobootstrap get: unrecognized arguments: --bogus"),
        (("status", "--bogus"), "(see python -m aiobootstrap status --help)"),
        # The most natural first try: the rank alone, answered with what was meant.
        (("get", "3"), "python -m aiobootstrap get: unrecognized arguments: 3; did you mean --rank 3?"),
        (("register", "3", "--session-id", "s"), "unrecognized arguments: 3; did you mean --rank 3?"),
    ],
)
def test_bad_arguments_are_one_line_and_status_2(url: str, args: tuple[str, ...], text: str) -> None:
    """A bad argument: status 2 and one line, before anything is sent."""
    assert_one_line_error(tool(*args, "--url", url), 2, text)


@pytest.mark.parametrize("bad", ["ftp://127.0.0.1:1", "not a url", "127.0.0.1:6789"])
def test_a_bad_url_is_a_bad_argument(bad: str) -> None:
    """A --url that is not http(s):// is status 2 and one line naming --url, as for any bad argument."""
    assert_one_line_error(tool("get", "--url", bad, "--rank", "0"), 2, "--url")


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (None, "cannot read the weights file"),
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
    ],
    ids=["missing", "invalid-json", "not-an-object"],
)
def test_a_bad_weights_file_is_one_line_and_status_2(
    url: str, namespace: str, tmp_path: Path, content: str | None, text: str
) -> None:
    """register refuses a missing, non-JSON or non-object weights file, and registers nothing."""
    path = tmp_path / "weights.json"
    if content is not None:
        path.write_text(content)
    result = tool(
        "register", "--url", url, "--namespace", namespace, "--rank", "0",
        "--session-id", "s", "--weights-file", str(path),
    )  # fmt: skip
    assert_one_line_error(result, 2, text)
    assert "target: 0 registered" in tool("status", "--url", url, "--namespace", namespace).stdout


async def test_a_rank_outside_the_world_size_is_the_servers_detail_and_status_2(
    aiohttp_server: AiohttpServer,
) -> None:
    """A request the server refuses (400) ends with its detail and status 2."""
    server = await aiohttp_server(create_app(ServerConfig(world_size=2)))
    url = str(server.make_url("")).rstrip("/")
    result = await asyncio.to_thread(tool, "get", "--url", url, "--rank", "5")
    assert_one_line_error(result, 2, "Rank 5 is outside the world size 2")


# -- serving and tokens ---------------------------------------------------


def test_serve_subcommand_serves_like_the_bare_command() -> None:
    """`python -m aiobootstrap serve --port 0` serves, with the same top-level options."""
    server = subprocess.Popen(
        command("serve", "--port", "0"), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("aiobootstrap listening on http://127.0.0.1:")
        url = line.removeprefix("aiobootstrap listening on ").strip()
        assert tool("status", "--url", url).returncode == 0
    finally:
        server.terminate()
        assert server.wait(GUARD) == 0
        assert server.stdout is not None
        server.stdout.close()


async def test_the_token_comes_from_the_flag_or_the_environment(
    aiohttp_server: AiohttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--token, else AIOBOOTSTRAP_AUTH_TOKEN, is sent as a bearer token; a refusal is status 2."""

    async def ranks(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bearer s3cret":
            return web.json_response({"detail": "A valid bearer token is required."}, status=401)
        return web.json_response({"version": 0, "world_size": None, "ranks": [], "missing": None})

    app = web.Application()
    app.router.add_get("/ranks", ranks)
    server = await aiohttp_server(app)
    url = str(server.make_url("")).rstrip("/")

    async def status(*args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
        if token is None:
            monkeypatch.delenv("AIOBOOTSTRAP_AUTH_TOKEN", raising=False)
        else:
            monkeypatch.setenv("AIOBOOTSTRAP_AUTH_TOKEN", token)
        return await asyncio.to_thread(tool, "status", "--url", url, "--kind", "transfer_engine_info", *args)

    assert (await status("--token", "s3cret")).returncode == 0
    assert (await status(token="s3cret")).returncode == 0
    assert (await status("--token", "s3cret", token="wrong")).returncode == 0
    assert_one_line_error(await status(token="wrong"), 2, "A valid bearer token is required.")


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.04, "0.0s"), (4.25, "4.2s"), (185, "3m05s"), (7620, "2h07m"), (273600, "3d04h")],
)
def test_ages_read_like_a_human_wrote_them(seconds: float, shown: str) -> None:
    """status shows ages as seconds, then minutes, hours and days."""
    assert format_age(seconds) == shown


def test_wait_without_a_world_size_anywhere_is_status_2(url: str, namespace: str) -> None:
    """wait reads the server's world size; a server without one and no --world-size: one line, status 2."""
    result = tool("wait", "--url", url, "--namespace", namespace)
    assert_one_line_error(result, 2, "the server has no --world-size: give wait --world-size N")


def test_status_watch_prints_each_change_as_a_line_when_not_on_a_terminal(
    url: str, namespace: str, weights: Path
) -> None:
    """status --watch to a pipe: the summary once, then one line per change, until interrupted (130)."""
    follower = subprocess.Popen(
        command("status", "--url", url, "--namespace", namespace, "--world-size", "2", "--watch"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert follower.stdout is not None
    try:
        assert (
            follower.stdout.readline()
            == "transfer_engine_info, role target: 0 registered of 2, missing: 0-1\n"
        )
        # As plain status, a kind the deployment does not use is left out (it printed "0 registered of 2").
        register(url, namespace, 1, weights)
        assert follower.stdout.readline() == "version 1 put transfer_engine_info rank 1 role target\n"
    finally:
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=GUARD)
    assert (follower.returncode, err) == (130, "")


def test_status_watch_redraws_in_place_on_a_terminal(url: str, namespace: str, weights: Path) -> None:
    """status --watch on a terminal: the lines drawn again in place at a change, the missing rank gone."""
    primary, secondary = pty.openpty()
    follower = subprocess.Popen(
        command("status", "--url", url, "--namespace", namespace, "--world-size", "2", "--watch",
                "--kind", "transfer_engine_info"),
        stdout=secondary, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(secondary)
    seen = ""

    def until(text: str) -> None:
        nonlocal seen
        deadline = time.monotonic() + GUARD
        while text not in seen:
            assert time.monotonic() < deadline, seen
            ready, _, _ = select.select([primary], [], [], GUARD)
            assert ready, seen
            seen += os.read(primary, 1024).decode()

    try:
        until("0 registered of 2, missing: 0-1")
        register(url, namespace, 0, weights)
        until("\x1b[1F\x1b[J")  # up one line, cleared
        until("1 registered of 2, missing: 1")
    finally:
        follower.send_signal(signal.SIGINT)
        follower.wait(GUARD)
        os.close(primary)
    assert follower.returncode == 130
