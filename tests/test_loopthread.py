"""LoopThread: a caller that gives up never leaves its coroutine running on the loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from aiobootstrap._loopthread import LoopThread

from .helpers.waits import GUARD


def test_interrupt_inside_submission_still_cancels_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt after the coroutine is scheduled but before its future is returned cancels it."""
    started = threading.Event()
    cancelled = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    real_submit = asyncio.run_coroutine_threadsafe

    def submit_then_interrupt(coro: Any, loop: asyncio.AbstractEventLoop) -> Any:
        real_submit(coro, loop)
        assert started.wait(GUARD)  # the coroutine runs: the worst moment to lose its future
        raise KeyboardInterrupt

    loop_thread = LoopThread("test loop")
    try:
        monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", submit_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            loop_thread.run(forever())
        assert cancelled.wait(GUARD)
    finally:
        monkeypatch.undo()
        loop_thread.close()
