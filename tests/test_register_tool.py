"""register does what get reads: every kind, roles, any field, a whole info file (issue 19, item 9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.ports import quiet_port

from .helpers.tools import assert_one_line_error, namespace, tool, url

__all__ = ["namespace", "url"]  # the fixtures, shared with test_tools


def get(url: str, namespace: str, *args: str) -> dict[str, object]:
    result = tool("get", "--url", url, "--namespace", namespace, *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_register_without_a_weights_file_registers_empty_weights(url: str, namespace: str) -> None:
    """--weights-file is optional: without it the weights_info_dict is {}."""
    result = tool("register", "--url", url, "--namespace", namespace, "--rank", "1", "--session-id", "s:1")
    assert result.returncode == 0, result.stderr
    info = get(url, namespace, "--rank", "1")
    assert (info["session_id"], info["weights_info_dict"]) == ("s:1", {})


def test_register_a_parallelism_config_of_a_role(url: str, namespace: str) -> None:
    """--kind parallelism_config with --field values, in --role draft: get reads it back exactly."""
    result = tool(
        "register", "--url", url, "--namespace", namespace, "--rank", "2", "--kind", "parallelism_config",
        "--role", "draft", "--field", "tp_size=8", "--field", 'layout={"pp": [0, 1]}',
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "rank 2's parallelism_config (role draft)" in result.stdout
    config = get(url, namespace, "--rank", "2", "--kind", "parallelism_config", "--role", "draft")
    assert config["parallelism_config"] == {"tp_size": 8, "layout": {"pp": [0, 1]}}


def test_register_a_nixl_info_file_whole(url: str, namespace: str, tmp_path: Path) -> None:
    """--info-file sends a tagged backend's transfer_engine_info whole, with no session id."""
    info_file = tmp_path / "nixl.json"
    info_file.write_text(json.dumps({"backend": "nixl", "agent_name": "a0", "agent_metadata": "bWV0YQ=="}))
    result = tool(
        "register", "--url", url, "--namespace", namespace, "--rank", "0", "--info-file", str(info_file)
    )
    assert result.returncode == 0, result.stderr
    info = get(url, namespace, "--rank", "0")
    assert (info["backend"], info["agent_name"]) == ("nixl", "a0")


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("--session-id", ""), "a session id is a non-empty string"),
        (("--session-id", "s", "--field", "nojson"), "is not KEY=JSON"),
        (("--session-id", "s", "--field", "x=bare"), "the value of 'x' is not JSON"),
    ],
    ids=["empty-session-id", "field-without-equals", "field-not-json"],
)
def test_register_refuses_a_bad_option_in_one_line(
    url: str, namespace: str, args: tuple[str, ...], text: str
) -> None:
    """An empty --session-id or a --field that is not KEY=JSON: argparse's one line, status 2."""
    assert_one_line_error(
        tool("register", "--url", url, "--namespace", namespace, "--rank", "0", *args), 2, text
    )


def test_register_without_a_session_id_says_it_is_required(url: str, namespace: str) -> None:
    """Classic info with no session id: the server's 400 says the field is required, status 2."""
    result = tool("register", "--url", url, "--namespace", namespace, "--rank", "0")
    assert_one_line_error(result, 2, "transfer_engine_info.session_id is required")


def test_register_help_explains_every_option() -> None:
    """--rank and --session-id of register, and wait's --world-size, have help text."""
    register_help = " ".join(tool("register", "--help").stdout.split())
    assert "--rank RANK the rank whose record this is" in register_help
    assert "--session-id SESSION_ID the transfer engine's session id" in register_help
    assert "--world-size N ranks 0 to N-1 are expected" in " ".join(tool("wait", "--help").stdout.split())


def test_register_says_at_once_that_it_keeps_trying_a_server_that_does_not_answer() -> None:
    """register keeps trying for --timeout seconds (10 by default); its first line says so at once, so the wait
    does not look hung where get gives up after one refused try; then the one-line error, status 3."""
    port = quiet_port()
    result = tool(
        "register",
        "--url",
        f"http://127.0.0.1:{port}",
        "--rank",
        "0",
        "--session-id",
        "s",
        "--timeout",
        "0.5",
    )
    assert result.returncode == 3
    notice, error = result.stderr.splitlines()
    assert notice == f"no answer from http://127.0.0.1:{port} yet; trying for up to 0.5 s (--timeout)"
    assert "could not be reached" in error
