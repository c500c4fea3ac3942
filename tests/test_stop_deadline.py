"""A stop stuck past its deadline ends the process anyway (status 1), and the log says where it was stuck:
a real subprocess whose stop never ends by itself."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from .helpers.waits import GUARD

_STUCK = textwrap.dedent(
    """
    import asyncio, logging
    from aiobootstrap.cli.stop_deadline import StopDeadline

    async def close_that_never_ends():
        await asyncio.Event().wait()

    async def main():
        logging.basicConfig(level=logging.INFO)
        deadline = StopDeadline(asyncio.get_running_loop(), 0.2)
        deadline.arm()
        await close_that_never_ends()

    asyncio.run(main())
    """
)

_DONE = textwrap.dedent(
    """
    import asyncio, time
    from aiobootstrap.cli.stop_deadline import StopDeadline

    async def main():
        deadline = StopDeadline(asyncio.get_running_loop(), 0.2)
        deadline.arm()
        deadline.disarm()
        await asyncio.sleep(0.4)  # past the deadline: disarmed, it does nothing

    asyncio.run(main())
    print("stopped in time")
    """
)


def test_a_stop_stuck_past_its_deadline_exits_1_naming_what_it_awaited() -> None:
    done = subprocess.run([sys.executable, "-c", _STUCK], capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 1
    assert "the stop did not end within 0.2 s; exiting without it" in done.stderr
    assert "close_that_never_ends" in done.stderr  # the stuck task's stack


def test_a_stop_that_ends_in_time_is_left_alone() -> None:
    done = subprocess.run([sys.executable, "-c", _DONE], capture_output=True, text=True, timeout=GUARD)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "stopped in time", "")
