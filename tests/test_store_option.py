"""--store and AIOBOOTSTRAP_STORE as a user runs them: a real subprocess on a free port."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from aiobootstrap import BootstrapClient, ServerConfig

from .conftest import GUARD
from .test_cli import launch, serve


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("nowhere", "has no scheme"),
        ("ftp://host/0", "unknown scheme 'ftp'"),
        ("redis://", "names no host"),
        ("redis://host:port/0", "malformed"),
        ("redis://host/zero", "a database is a number"),
        ("unix://", "use unix:///path/redis.sock"),
        ("file:", "names no file"),
        ("memory:extra", "takes nothing after the colon"),
    ],
)
def test_a_malformed_store_url_fails_at_start_with_one_line_and_status_2(url: str, said: str) -> None:
    """A store URL that names no store stops the server before it listens: exit 2, one line."""
    process = launch("--port", "0", "--store", url)
    out, err = process.communicate(timeout=GUARD)
    assert process.returncode == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert said in lines[0]


def test_a_password_in_a_malformed_url_is_not_printed() -> None:
    """The error line about a store URL never shows its password."""
    process = launch("--port", "0", "--store", "redis://user:secret@host:port/0")
    _, err = process.communicate(timeout=GUARD)
    assert process.returncode == 2
    assert "secret" not in err
    assert "***" in err


def test_store_and_state_file_together_are_refused(tmp_path: Path) -> None:
    """--state-file is the store file:PATH: naming another store beside it is a mistake, said in one line."""
    journal = str(tmp_path / "state.journal")
    process = launch("--port", "0", "--store", "redis://127.0.0.1:1/0", "--state-file", journal)
    _, err = process.communicate(timeout=GUARD)
    assert process.returncode == 2
    assert "either a state file or a store" in err


def _stop(process: object) -> None:
    assert hasattr(process, "send_signal")
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=GUARD)  # type: ignore[attr-defined]


@pytest.mark.parametrize("how", ["flag", "environment"])
async def test_a_file_store_keeps_registrations_across_a_restart(tmp_path: Path, how: str) -> None:
    """--store file:PATH (or AIOBOOTSTRAP_STORE) journals registrations; a restarted server has them."""
    url = f"file:{tmp_path / 'state.journal'}"
    if how == "flag":
        args, env = ["--store", url], None
    else:
        args, env = [], {**os.environ, "AIOBOOTSTRAP_STORE": url}
    first = serve("--log-level", "warning", *args, env=env)
    try:
        async with BootstrapClient(first.url) as client:
            await client.register(2, session_id="kept", weights_info_dict={"w": [1]})
    finally:
        _stop(first.process)
    second = serve("--log-level", "warning", *args, env=env)
    try:
        async with BootstrapClient(second.url) as client:
            info = await client.get(2, timeout=GUARD)
            assert (info.session_id, info.weights_info_dict) == ("kept", {"w": [1]})
    finally:
        _stop(second.process)


def test_the_state_file_wins_over_the_environment(tmp_path: Path) -> None:
    """With AIOBOOTSTRAP_STORE set, an explicit --state-file still names the store."""
    journal = tmp_path / "state.journal"
    env = {**os.environ, "AIOBOOTSTRAP_STORE": "redis://127.0.0.1:1/0"}
    served = serve("--log-level", "warning", "--state-file", str(journal), env=env)
    _stop(served.process)
    assert journal.exists()


def test_the_config_validates_the_store_url() -> None:
    """ServerConfig refuses a malformed store URL at creation, for embedders as for the CLI."""
    with pytest.raises(ValueError, match="unknown scheme"):
        ServerConfig(store="mongodb://x")
    assert ServerConfig(state_file="/tmp/s.journal").store_url == "file:/tmp/s.journal"
