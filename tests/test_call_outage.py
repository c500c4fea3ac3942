"""A replica whose calls to Redis fail while its feed works: parked waits are still woken.

The replica's call pool goes through a proxy of the test's own
(``tests/stall_proxy.py``) and its feed straight to Redis, so the calls alone
stall, as a broken path or a full pool would; no ``resync()`` comes then.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from aiobootstrap import Registry
from aiobootstrap.exceptions import StoreUnavailable
from aiobootstrap.store.redis import RedisStore
from testbed.redis_server import RedisServer

from .helpers.registry import info_key
from .helpers.waits import GUARD, until
from .stall_proxy import StallProxy

FAST: dict[str, Any] = {"timeout": 0.3, "open_timeout": 1.0, "poll_interval": 0.2}
ANSWER = 3.0
"""The bound on a woken wait's answer, well inside its own deadline (a wait dropped would last that long)."""
DEADLINE = 20.0


class Replicas:
    def __init__(self, a: Registry, b: RedisStore, proxy: StallProxy) -> None:
        self.a, self.b, self.proxy = a, b, proxy
        self.failures = 0

    def count_failures(self, name: str) -> None:
        """Count the StoreUnavailable raised by A's store method ``name`` (an observation, nothing else)."""
        store = self.a.store
        method: Callable[..., Any] = getattr(store, name)

        async def counted(*args: Any) -> Any:
            try:
                return await method(*args)
            except StoreUnavailable:
                self.failures += 1
                raise

        setattr(store, name, counted)


@pytest.fixture
async def replicas(redis_server: RedisServer) -> AsyncIterator[Replicas]:
    proxy = StallProxy(redis_server.port)
    await proxy.start()
    store = RedisStore(proxy.url, **FAST)
    store._connection.feed_url = redis_server.url  # the feed goes past the proxy
    a = Registry(store)
    await store.open(a)
    b = RedisStore(redis_server.url, **FAST)
    await b.open(Registry(b))
    try:
        yield Replicas(a, b, proxy)
    finally:
        a.close()
        await store.close()
        await b.close()
        await proxy.close()


def value(session: str) -> dict[str, Any]:
    return {"session_id": session, "weights_info_dict": {}}


async def test_a_change_whose_read_fails_is_read_again_once_the_calls_work(replicas: Replicas) -> None:
    """The feed announces rank 5 while A's calls stall: its read fails, and the wait is answered after.

    Fails before issue 18: the key was dropped on ``StoreUnavailable`` and the
    wait lasted until its deadline.
    """
    key = info_key(5)
    waiting = asyncio.create_task(replicas.a.wait(key, DEADLINE))
    await until(lambda: replicas.a.waiting_keys == 1)
    replicas.count_failures("get_many")
    replicas.proxy.stall()
    await replicas.b.put(key, value("through-b"))
    await until(lambda: replicas.failures >= 1)
    replicas.proxy.heal()
    record = await asyncio.wait_for(waiting, ANSWER)
    assert record is not None
    assert record.value["session_id"] == "through-b"


async def test_a_wait_whose_first_read_fails_reads_again_once_the_calls_work(replicas: Replicas) -> None:
    """Rank 5 registered while A's calls stall; a wait that parks then reads it once they work.

    Fails before issue 18: the parked wait's failed read was taken for "absent".
    """
    key = info_key(5)
    replicas.proxy.stall()
    await replicas.b.put(key, value("before"))
    replicas.count_failures("get")
    waiting = asyncio.create_task(replicas.a.wait(key, DEADLINE))
    # One read before parking, one as it joins the key's waitlist: both fail.
    await until(lambda: replicas.failures >= 2 and replicas.a.parked == 1, GUARD)
    replicas.proxy.heal()
    record = await asyncio.wait_for(waiting, ANSWER)
    assert record is not None
    assert record.value["session_id"] == "before"
