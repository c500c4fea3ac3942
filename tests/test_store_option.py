"""--store and AIOBOOTSTRAP_STORE: read into the config, and as a user runs them, a real subprocess."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from aiobootstrap import BootstrapClient, ServerConfig
from aiobootstrap.cli.parser import server_config, server_parser

from .helpers.cli import launch, serve
from .helpers.waits import GUARD


def _config(*argv: str, environ: dict[str, str] | None = None) -> ServerConfig:
    """The config ``python -m aiobootstrap ARGV`` would serve with, in ``environ``."""
    return server_config(server_parser().parse_args(list(argv)), environ or {})


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
def test_a_malformed_store_url_is_refused_in_one_line(url: str, said: str) -> None:
    """A store URL that names no store is refused with one line saying what is wrong with it."""
    with pytest.raises(ValueError, match=re.escape(said)) as caught:
        _config("--store", url)
    assert "\n" not in str(caught.value)


def test_a_malformed_store_url_fails_at_start_with_one_line_and_status_2_hiding_its_password() -> None:
    """The server stops before it listens: exit 2, one line, and never the URL's password."""
    process = launch("--port", "0", "--store", "redis://user:secret@host:port/0")
    out, err = process.communicate(timeout=GUARD)
    assert process.returncode == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "malformed" in err
    assert "secret" not in err
    assert "***" in err


@pytest.mark.parametrize("store", ["redis://127.0.0.1:1/0", "memory:", "file:/tmp/other.journal"])
def test_store_and_state_file_together_are_refused(store: str) -> None:
    """--state-file is the store file:PATH: naming any store beside it, even memory:, is refused in one line."""
    with pytest.raises(ValueError, match="either --state-file or --store"):
        _config("--store", store, "--state-file", "/tmp/state.journal")


def test_the_store_comes_from_the_flag_the_state_file_or_the_environment() -> None:
    """--store wins over AIOBOOTSTRAP_STORE, and so does --state-file; without either, the environment's."""
    environ = {"AIOBOOTSTRAP_STORE": "redis://127.0.0.1:1/0"}
    assert _config(environ=environ).store_url == "redis://127.0.0.1:1/0"
    assert _config("--store", "file:/tmp/s.journal", environ=environ).store_url == "file:/tmp/s.journal"
    assert _config("--state-file", "/tmp/s.journal", environ=environ).store_url == "file:/tmp/s.journal"
    assert _config().store_url == "memory:"


def _stop(process: object) -> None:
    assert hasattr(process, "send_signal")
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=GUARD)  # type: ignore[attr-defined]


async def test_a_file_store_keeps_registrations_across_a_restart(tmp_path: Path) -> None:
    """--store file:PATH journals registrations; a restarted server has them."""
    args = ["--log-level", "warning", "--store", f"file:{tmp_path / 'state.journal'}"]
    first = serve(*args)
    try:
        async with BootstrapClient(first.url) as client:
            await client.register(2, session_id="kept", weights_info_dict={"w": [1]})
    finally:
        _stop(first.process)
    second = serve(*args)
    try:
        async with BootstrapClient(second.url) as client:
            info = await client.get(2, timeout=GUARD)
            assert (info.session_id, info.weights_info_dict) == ("kept", {"w": [1]})
    finally:
        _stop(second.process)


def test_the_config_validates_the_store_url() -> None:
    """ServerConfig refuses a malformed store URL at creation, for embedders as for the CLI."""
    with pytest.raises(ValueError, match="unknown scheme"):
        ServerConfig(store="mongodb://x")
    assert ServerConfig(state_file="/tmp/s.journal").store_url == "file:/tmp/s.journal"
