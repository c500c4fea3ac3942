"""Helpers for tests that drive aiobootstrap from plain threads, where there is no loop to yield to."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .helpers.waits import GUARD


def wait_until(condition: Callable[[], bool]) -> None:
    """Block until ``condition()`` holds (fail after GUARD seconds); polls every millisecond."""
    deadline = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.001)


def threads_named(prefix: str) -> list[threading.Thread]:
    """The live threads whose name starts with ``prefix``: aiobootstrap names the ones it starts."""
    return [thread for thread in threading.enumerate() if thread.name.startswith(prefix)]
