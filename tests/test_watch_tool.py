"""python -m aiobootstrap watch: one line per change as it happens (or --json), until interrupted."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from aiobootstrap import WatchedChange
from aiobootstrap.cli.watch_tool import describe

from .helpers.tools import GUARD, command, tool
from .helpers.tools import url as url  # the module's server fixture, shared


def test_watch_prints_changes_as_they_happen_until_interrupted(url: str, tmp_path) -> None:
    """--json prints each change as the wire has it, one per line, the later ones as they happen; Ctrl-C ends it."""
    weights = tmp_path / "w.json"
    weights.write_text("{}")

    def register(rank: int) -> None:
        result = tool(
            "register", "--url", url, "--namespace", "w", "--rank", str(rank), "--session-id", "s",
            "--weights-file", str(weights),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr

    register(0)
    watcher = subprocess.Popen(
        command("watch", "--url", url, "--namespace", "w", "--json"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert watcher.stdout is not None
    try:
        first = json.loads(watcher.stdout.readline())
        assert first == {
            "op": "put",
            "kind": "transfer_engine_info",
            "role": "target",
            "rank": 0,
            "version": 1,
        }
        register(4)
        assert json.loads(watcher.stdout.readline())["rank"] == 4
    finally:
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=GUARD)
    assert watcher.returncode == 130
    assert "Traceback" not in err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_watch_parked_with_nothing_to_print_exits_at_once_when_interrupted(url: str, signum: int) -> None:
    """Parked in a long-poll (its namespace quiet), the watcher exits at once on SIGINT (130) or SIGTERM (143), no traceback.

    The server's watcher gauge says when the long-poll is parked; the exit is awaited, not timed.
    """
    namespace = f"quiet{signum}"
    watcher = subprocess.Popen(
        command("watch", "--url", url, "--namespace", namespace),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _until_parked(url, 1)
    finally:
        watcher.send_signal(signum)
        out, err = watcher.communicate(timeout=GUARD)
    assert watcher.returncode == 128 + signum
    assert out == ""
    assert "Traceback" not in err


def _until_parked(url: str, count: int) -> None:
    """Until the server's ``aiobootstrap_watchers`` gauge reads ``count`` (read from /metrics)."""
    import time
    import urllib.request

    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/metrics", timeout=GUARD) as reply:
            text = reply.read().decode()
        if any(
            line.split()[-1] in (str(count), f"{count}.0")
            for line in text.splitlines()
            if line.startswith("aiobootstrap_watchers ")
        ):
            return
    raise AssertionError(f"no {count} watchers parked within {GUARD} s")


def test_the_line_for_people() -> None:
    assert describe(WatchedChange("put", "transfer_engine_info", 7, role="target", rank=3)) == (
        "version 7 put transfer_engine_info rank 3 role target"
    )
    assert describe(WatchedChange("delete", "encoder_urls", 8, url="http://e:1")) == (
        "version 8 delete encoder_urls http://e:1"
    )
    # A named record (a Mooncake key, a prefill rank) is told by its name, not as "rank None role ".
    assert describe(WatchedChange("put", "metadata", 9, key="mooncake/ram/10.0.0.7:18000")) == (
        "version 9 put metadata mooncake/ram/10.0.0.7:18000"
    )


def test_a_kind_the_server_does_not_serve_is_its_one_line(url: str) -> None:
    """--kind is any name; the server's 400 names the kinds it serves (metadata and the prefill kinds among them)."""
    result = tool("watch", "--url", url, "--kind", "bogus")
    assert result.returncode != 0
    assert "metadata" in result.stderr
    assert "prefill_rank" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("args", "text"), [(["--after", "-1"], "version"), (["--ranks", "x"], "ranks")])
def test_bad_arguments_are_one_line(args: list[str], text: str) -> None:
    result = tool("watch", *args)
    assert result.returncode == 2
    assert text in result.stderr
    assert "Traceback" not in result.stderr


def test_watch_history_option_reaches_the_config() -> None:
    from aiobootstrap.cli.parser import server_config, server_parser

    assert server_config(server_parser().parse_args(["--watch-history", "7"]), {}).watch_history == 7
