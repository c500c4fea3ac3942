"""The operator tools run as a test runs them: through the console script's ``main()`` in this
process, or as a real ``python -m aiobootstrap`` subprocess; and the fixtures of the modules that
share one server for their tools (``url``, one per module, and a ``namespace`` per test)."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from collections.abc import Iterator
from unittest import mock

import pytest

from aiobootstrap.cli.main import main

GUARD = 30.0
"""Seconds a test waits for a subprocess that should finish at once."""


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "aiobootstrap", *args]


def tool(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``python -m aiobootstrap ARGS`` run by the console script's ``main()`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        mock.patch.object(sys, "stdin", io.StringIO(stdin)),
    ):
        try:
            status = main(list(args))
        except SystemExit as exc:  # argparse's, for a bad argument
            status = int(exc.code or 0)
    return subprocess.CompletedProcess(list(args), status, out.getvalue(), err.getvalue())


def assert_one_line_error(result: subprocess.CompletedProcess[str], status: int, text: str) -> None:
    assert result.returncode == status, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert text in result.stderr


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """One server for the module; each test works in a namespace of its own."""
    server = subprocess.Popen(
        command("--port", "0"), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    assert line.startswith("aiobootstrap listening on "), line
    yield line.removeprefix("aiobootstrap listening on ").strip()
    server.terminate()
    server.wait(GUARD)
    server.stdout.close()


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace named for the test, so tests sharing the server never see each other's ranks."""
    return re.sub(r"[^A-Za-z0-9.-]", "-", request.node.name.removeprefix("test_"))[:63]
