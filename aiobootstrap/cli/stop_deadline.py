"""A stop that does not end by its deadline ends the process anyway, saying where it was stuck.

A server asked to stop must stop: a supervisor sends ``SIGTERM`` and waits,
and a shell's ``kill $A; wait $A`` waits for ever. Each step of a stop is
bounded (parked waits answered at once, in-flight requests given
``shutdown_timeout``, the store's close its own bounds), so this deadline is
a backstop for a bound that failed, not a path a stop takes. Past it the
log gets one ERROR line and the stacks of every thread and task (what was
stuck, to be fixed), and the process exits with status 1 without running
what is left of the stop.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import sys
import threading

__all__ = ["STOP_GRACE", "StopDeadline"]

log = logging.getLogger("aiobootstrap")

STOP_GRACE = 20.0
"""Seconds a stop may take beyond ``shutdown_timeout`` (the store's bounded close is 5 s per step, a few
steps) before the process ends without it."""

_SHOWN = 2.0
"""Seconds the loop has to print its tasks' stacks before the process exits."""


class StopDeadline:
    """Armed when a stop begins; past ``seconds`` it logs the stacks and ends the process (status 1)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        self._loop = loop
        self._timer = threading.Timer(seconds, self._overdue, args=(seconds,))
        self._timer.daemon = True

    def arm(self) -> None:
        self._timer.start()

    def disarm(self) -> None:
        self._timer.cancel()

    def _overdue(self, seconds: float) -> None:
        log.error("the stop did not end within %g s; exiting without it (stacks follow)", seconds)
        shown = threading.Event()

        def tasks() -> None:
            # In the loop (its tasks are its own to walk): what each was awaiting.
            chains = "\n".join(_awaiting(task) for task in asyncio.all_tasks(self._loop))
            log.error("the loop's tasks, each with what it awaits:\n%s", chains)
            shown.set()

        try:
            self._loop.call_soon_threadsafe(tasks)
        except RuntimeError:
            pass  # the loop is closed: only the threads' stacks are left to show
        shown.wait(_SHOWN)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(1)


def _awaiting(task: asyncio.Task[object]) -> str:
    """The task and its chain of awaits, outermost first: where it is stuck (``Task.print_stack`` shows a
    suspended task's outermost coroutine only)."""
    lines = [repr(task)]
    coro: object = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            code = frame.f_code
            lines.append(f'  File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}')
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return "\n".join(lines)
