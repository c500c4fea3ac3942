"""``python -m aiobootstrap`` as a user runs it: a real server subprocess, and the environment it
starts in."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .waits import GUARD

LISTENING = "aiobootstrap listening on "


class Served:
    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url


def launch(*args: str, **popen: object) -> subprocess.Popen[str]:
    return subprocess.Popen(  # type: ignore[no-any-return]
        [sys.executable, "-m", "aiobootstrap", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,  # type: ignore[call-overload]
    )


def serve(*args: str, **popen: object) -> Served:
    process = launch("--port", "0", *args, **popen)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith(LISTENING):
        process.kill()
        _, err = process.communicate(timeout=GUARD)
        pytest.fail(f"server did not start: {line!r} {err!r}")
    return Served(process, line[len(LISTENING) :].strip())


def _environ(token: str | None = None) -> dict[str, str]:
    """This process's environment without AIOBOOTSTRAP_AUTH_TOKEN, or with ``token`` as it."""
    env = {k: v for k, v in os.environ.items() if k != "AIOBOOTSTRAP_AUTH_TOKEN"}
    if token is not None:
        env["AIOBOOTSTRAP_AUTH_TOKEN"] = token
    return env
