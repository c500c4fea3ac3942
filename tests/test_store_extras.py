"""A store URL names its store in ``--help``, and one whose extra is not installed is one line before serving
(issue 41, item 13).

The server runs as ``python -m aiobootstrap`` does, in a subprocess whose ``sys.modules`` holds ``None`` for
the extra's module: Python's own way of saying a module cannot be imported, so the test needs no second
environment without the extra.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from .helpers.waits import GUARD

_SERVE = (
    "import sys; sys.modules[{module!r}] = None; "
    "sys.argv = ['aiobootstrap', '--port', '0', '--store', {url!r}]; "
    "from aiobootstrap.cli.main import main; raise SystemExit(main())"
)


def test_the_help_names_every_store_scheme() -> None:
    """``--store``'s help lists etcd:// and etcds:// beside the others."""
    shown = subprocess.run(
        [sys.executable, "-m", "aiobootstrap", "--help"], capture_output=True, text=True, check=True
    ).stdout
    words = " ".join(shown.split())  # argparse wraps the help where it likes
    store = words[words.index("--store URL where records live") :]
    for scheme in (
        "memory:",
        "file:PATH",
        "redis://",
        "rediss://",
        "unix://",
        "redis+sentinel://",
        "etcd://",
    ):
        assert scheme in store.replace(" ", ""), scheme
    assert "etcds://" in store.replace(" ", "")


@pytest.mark.parametrize(
    ("module", "url", "extra"),
    # Port 1: nothing listens there, so a check that let the URL through could reach no one's store (the
    # machine's shared Redis on 6379 least of all).
    [("aetcd", "etcd://127.0.0.1:1", "etcd"), ("redis", "redis://127.0.0.1:1/0", "redis")],
)
def test_a_store_url_whose_extra_is_missing_is_one_line_before_serving(
    module: str, url: str, extra: str
) -> None:
    """Exit status 2 and one line naming the extra to install: no traceback from the app's start-up, and
    no ``listening`` line (it is refused before the server serves)."""
    process = subprocess.run(
        [sys.executable, "-c", _SERVE.format(module=module, url=url)],
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    assert process.returncode == 2, process.stderr
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1, process.stderr
    assert f"pip install 'aiobootstrap[{extra}]'" in lines[0]
    assert url in lines[0]
    assert "listening" not in process.stdout
