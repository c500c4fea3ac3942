"""A registration's caller goes on before the waiters it wakes: its reply is not queued behind theirs."""

from __future__ import annotations

import asyncio

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
