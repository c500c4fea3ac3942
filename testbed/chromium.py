"""How Debian's Chromium is launched on these machines: one place for the browser tests and ``bench.page``.

Playwright drives ``/usr/bin/chromium`` passed as the executable; its own
browser download (``playwright install``) does not work here and is never run.
"""

from __future__ import annotations

import importlib.util
import os

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "missing"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def missing() -> str | None:
    """Why the browser cannot be driven here (a sentence starting "chromium"), or ``None``."""
    if importlib.util.find_spec("playwright") is None:
        return "chromium tests need the playwright package (the test extra)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"chromium is not installed at {CHROMIUM} (Debian: apt-get install chromium)"
    return None
