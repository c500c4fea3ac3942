"""The cyclic garbage collector, set for a server process.

A registration parses its body into lists: a realistic info of 1,000 tensors
is 1,000 of them, all tracked by the cyclic collector though none can be
part of a cycle (they hold numbers). With CPython's default thresholds
(700, 10, 10) a stream of such registrations runs a young collection at
every registration and a full one every few dozen, and a full one walks
every list of every stored record: that doubled the server's CPU per
realistic registration (docs/benchmarks.md). A first threshold of 50,000
makes young collections, and so the full ones that follow them, rare; the
records themselves are freed by reference counting whatever the collector
does, so memory is not held longer.

Only ``python -m aiobootstrap`` calls this: an application that embeds the
server keeps its own settings.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "tune_collector"]

YOUNG_THRESHOLD = 50_000
"""Allocations (less deallocations) of tracked objects between young collections."""


def tune_collector() -> None:
    """Raise the collector's first threshold to :data:`YOUNG_THRESHOLD` (never lower it)."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
