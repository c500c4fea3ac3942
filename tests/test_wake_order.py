"""A registration's caller goes on before the waiters it wakes, and the registry's deliveries' subscribers hear each delivery in between."""

from __future__ import annotations

import asyncio
import logging

import pytest

from aiobootstrap.store import Key, Record

from .helpers.registry import info_key, open_registry, register_in
from .helpers.waits import GUARD, until


async def test_register_returns_before_its_waiters_resume() -> None:
    """When register() returns, its woken waiters have not run yet, and they all get the record next."""
    registry = await open_registry()
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


async def test_a_deliveries_subscriber_hears_each_delivery_before_any_waiter_resumes() -> None:
    """The subscriber is called once per delivery, with key and record; what it schedules runs before any waiter resumes."""
    waiters: list[asyncio.Task[Record | None]] = []
    calls: list[tuple[Key, Record | None, bool]] = []
    scheduled: list[bool] = []

    class Listener:
        def delivered(self, key: Key, record: Record | None) -> None:
            calls.append((key, record, any(waiter.done() for waiter in waiters)))
            asyncio.get_running_loop().call_soon(
                lambda: scheduled.append(any(waiter.done() for waiter in waiters))
            )

    registry = await open_registry()
    registry.deliveries.subscribe(Listener())
    waiters.extend(asyncio.create_task(registry.wait(info_key(8), timeout=GUARD)) for _ in range(20))
    await until(lambda: registry.parked == 20)
    record = await register_in(registry, 8, "s", {})
    assert calls == [(info_key(8), record, False)]
    assert scheduled == []  # the registration's caller goes first
    await asyncio.sleep(0)
    assert scheduled == [False]  # one loop turn later, before any waiter had resumed
    async with asyncio.timeout(GUARD):
        assert await asyncio.gather(*waiters) == [record] * 20
    assert registry.waiting_keys == 0


async def test_deliveries_are_deletions_and_records_waited_for_only() -> None:
    """A registration no one waits for is not delivered; a deletion is heard as None, waited for or not."""
    calls: list[tuple[Key, Record | None]] = []
    registry = await open_registry()

    class Listener:
        def delivered(self, key: Key, record: Record | None) -> None:
            calls.append((key, record))

    registry.deliveries.subscribe(Listener())
    await register_in(registry, 3, "s", {})
    assert calls == []
    await registry.unregister(info_key(3))
    assert calls == [(info_key(3), None)]


async def test_a_failing_deliveries_subscriber_is_logged_and_the_waiters_still_wake(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What a subscriber raises does not reach the store's feed: it is logged, and the waiters get their record."""

    class Listener:
        def delivered(self, key: Key, record: Record | None) -> None:
            raise RuntimeError("boom")

    registry = await open_registry()
    registry.deliveries.subscribe(Listener())
    waiter = asyncio.create_task(registry.wait(info_key(9), timeout=GUARD))
    await until(lambda: registry.parked == 1)
    with caplog.at_level(logging.ERROR, logger="aiobootstrap"):
        record = await register_in(registry, 9, "s", {})
    async with asyncio.timeout(GUARD):
        assert await waiter is record
    assert "A subscriber to the registry's deliveries failed" in caplog.text
