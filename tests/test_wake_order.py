"""A registration's caller goes on before the waiters it wakes: its reply is not queued behind theirs."""

from __future__ import annotations

import asyncio
import contextlib

from aiobootstrap.store import Record

from .conftest import GUARD, info_key, open_registry, register_in, until


async def test_register_returns_before_its_waiters_resume() -> None:
    """When register() returns, its woken waiters have not run yet, and they all get the record next."""
    registry = await open_registry(encode_reply=lambda record: b"reply")
    waiters = [asyncio.create_task(registry.wait(info_key(7), timeout=GUARD)) for _ in range(50)]
    await until(lambda: registry.parked == 50)
    record = await register_in(registry, 7, "s", {})
    # The HTTP handler writes the registration's 200 in this same step, so
    # with a thousand waiters it leaves first instead of after all of them.
    assert not any(waiter.done() for waiter in waiters)
    async with asyncio.timeout(GUARD):
        assert await asyncio.gather(*waiters) == [record] * 50
    assert registry.parked == 0
    assert registry.waiting_keys == 0


async def test_early_callbacks_run_after_register_returns_and_before_waiters_resume() -> None:
    """A waiter's early callback runs once, with the record, after register() returns and before it resumes."""
    registry = await open_registry(encode_reply=lambda record: b"reply")
    calls: list[tuple[int, object]] = []
    waiters: list[asyncio.Task[Record | None]] = []
    resumed_before: list[bool] = []
    for index in range(20):

        def early(record: Record, index: int = index) -> None:
            calls.append((index, record))
            resumed_before.append(any(waiter.done() for waiter in waiters))

        waiters.append(asyncio.create_task(registry.wait(info_key(8), timeout=GUARD, early=early)))
    await until(lambda: registry.parked == 20)
    record = await register_in(registry, 8, "s", {})
    assert calls == []  # the registration's caller goes first
    await asyncio.sleep(0)
    # One loop turn later every callback has run, each before any waiter had resumed.
    assert calls == [(index, record) for index in range(20)]
    assert resumed_before == [False] * 20
    async with asyncio.timeout(GUARD):
        assert await asyncio.gather(*waiters) == [record] * 20
    assert len(calls) == 20
    assert registry.waiting_keys == 0


async def test_early_callback_waits_for_a_record_newer_than_after() -> None:
    """A waiter with after=V is not called early for version V, only for the next one."""
    registry = await open_registry(encode_reply=lambda record: b"reply")
    first = await register_in(registry, 9, "old", {})
    calls: list[Record] = []
    waiter = asyncio.create_task(
        registry.wait(info_key(9), timeout=GUARD, after=first.version, early=calls.append)
    )
    await until(lambda: registry.parked == 1)
    await register_in(registry, 10, "other", {})
    await asyncio.sleep(0)
    assert calls == []
    second = await register_in(registry, 9, "new", {})
    async with asyncio.timeout(GUARD):
        assert await waiter == second
    assert calls == [second]


async def test_cancelled_waiter_leaves_no_early_callback() -> None:
    """A waiter cancelled while parked takes its early callback with it: a later registration calls nothing."""
    registry = await open_registry(encode_reply=lambda record: b"reply")
    calls: list[Record] = []
    waiter = asyncio.create_task(registry.wait(info_key(11), timeout=GUARD, early=calls.append))
    await until(lambda: registry.parked == 1)
    waiter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiter
    assert registry.waiting_keys == 0
    await register_in(registry, 11, "s", {})
    await asyncio.sleep(0)
    assert calls == []
