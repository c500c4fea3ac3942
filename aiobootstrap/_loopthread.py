"""A private event loop in a daemon thread, for callers that are plain threads.

Theory of operation
-------------------
:class:`LoopThread` runs ``loop.run_forever()`` in a daemon thread. A caller
hands it a coroutine with :meth:`LoopThread.run`, which submits it with
``asyncio.run_coroutine_threadsafe`` and blocks on the result; the coroutine's
exception, if any, is raised in the caller's thread.

A caller that stops waiting early (``KeyboardInterrupt``, or any other
exception raised into its thread while it blocks) cancels its coroutine on the
way out, so nothing it started goes on running on the loop.

:meth:`LoopThread.close` refuses new calls, cancels the calls still running
(their callers get ``RuntimeError``), awaits a cleanup coroutine (closing a
client session, stopping a server), then stops the loop and joins the thread.
Submission and closing share a lock, so no call can slip in after the loop
was told to stop and be left without an answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

__all__ = ["LoopThread", "LoopThreadOwner"]

log = logging.getLogger("aiobootstrap")

T = TypeVar("T")


class _Call:
    """One call on the loop, which its caller can abandon before or after it starts.

    Touched only in the loop's thread, so it needs no lock.
    """

    __slots__ = ("abandoned", "task")

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None
        self.abandoned = False

    def abandon(self) -> None:
        self.abandoned = True
        if self.task is not None:
            self.task.cancel()


class LoopThread:
    """An event loop running in a daemon thread of its own."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._closed = False
        self._calls: set[asyncio.Task[Any]] = set()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and return its result, blocking this thread."""
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError(f"{self.name}: a blocking call from its own event loop would deadlock")
        call = _Call()
        try:
            with self._lock:
                if self._closed:
                    coro.close()
                    raise RuntimeError(f"{self.name} is closed")
                future = asyncio.run_coroutine_threadsafe(self._tracked(coro, call), self._loop)
            return future.result()
        except concurrent.futures.CancelledError:
            # Only close() cancels a call whose caller is still waiting for it.
            raise RuntimeError(f"{self.name} was closed while the call was running") from None
        except BaseException:
            # The caller gave up (KeyboardInterrupt, an exception raised into
            # its thread): stop the coroutine too, so the loop is not left
            # running work nobody waits for. Through ``call``, not the future:
            # a KeyboardInterrupt can land inside run_coroutine_threadsafe after
            # it has scheduled the coroutine but before it returns the future.
            self._loop.call_soon_threadsafe(call.abandon)
            raise

    def close(self, cleanup: Callable[[], Awaitable[None]] | None = None) -> None:
        """Cancel running calls, await ``cleanup()``, stop the loop and join the thread.

        Safe to call more than once, and from any thread but the loop's own.
        """
        if self.in_loop_thread():
            raise RuntimeError(f"{self.name} cannot be closed from its own event loop")
        with self._lock:
            closing_here = not self._closed
            self._closed = True
        if not closing_here:
            # Another thread is closing it: return when it is done, as that thread will.
            self._thread.join()
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(cleanup), self._loop)
        try:
            future.result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()

    async def _tracked(self, coro: Coroutine[Any, Any, T], call: _Call) -> T:
        task = asyncio.current_task()
        assert task is not None
        if call.abandoned:  # its caller gave up before it started
            coro.close()
            raise asyncio.CancelledError
        call.task = task
        self._calls.add(task)
        try:
            return await coro
        finally:
            self._calls.discard(task)

    async def _shutdown(self, cleanup: Callable[[], Awaitable[None]] | None) -> None:
        calls = list(self._calls)
        for task in calls:
            task.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        if cleanup is not None:
            await cleanup()

    def _main(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                _cancel_leftovers(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()


class LoopThreadOwner(ABC):
    """Something that runs on a :class:`LoopThread`: ``with`` closes it, ``repr`` says if it is closed."""

    _loop_thread: LoopThread
    _open_state = "open"

    @property
    @abstractmethod
    def url(self) -> str:
        """The server's URL, shown by ``repr``."""

    @abstractmethod
    def close(self) -> None:
        """Stop the loop thread and release what runs on it."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._loop_thread.closed else self._open_state
        return f"<{type(self).__name__} {self.url} {state}>"


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel and finish whatever tasks remain, as ``asyncio.run`` does on its way out."""
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            log.error("a task failed while its loop was closing", exc_info=task.exception())
