"""The server process's collector settings (``cli.gc``): raised, never lowered, and only by the CLI."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

from aiobootstrap.cli.gc import YOUNG_THRESHOLD, tune_collector


@pytest.fixture
def thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


@pytest.mark.usefixtures("thresholds")
def test_tune_collector_raises_the_young_threshold_only() -> None:
    """The first threshold goes up to YOUNG_THRESHOLD; the others are left as they were."""
    gc.set_threshold(700, 11, 12)
    tune_collector()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 11, 12)


@pytest.mark.usefixtures("thresholds")
def test_tune_collector_never_lowers_a_higher_setting() -> None:
    """A process that already collects less often keeps its setting."""
    gc.set_threshold(YOUNG_THRESHOLD * 2, 10, 10)
    tune_collector()
    assert gc.get_threshold() == (YOUNG_THRESHOLD * 2, 10, 10)


def test_importing_the_package_leaves_the_collector_alone() -> None:
    """Embedding the server (importing it, making an app) does not change the process's collector."""
    code = (
        "import gc; before = gc.get_threshold(); import aiobootstrap; "
        "from aiobootstrap import create_app; create_app(); "
        "assert gc.get_threshold() == before, gc.get_threshold()"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
