"""The registry as the only way to the records: what a closed registry refuses and still answers, what a call costs."""

from __future__ import annotations

import types

import pytest

from aiobootstrap.core.registry import Registry
from aiobootstrap.exceptions import ShuttingDown
from aiobootstrap.store import Key, MemoryStore

KEY = Key("default", "transfer_engine_info", "default", 0)
LIST = Key("default", "encoder_urls", "default", 0)


async def _opened() -> tuple[MemoryStore, Registry]:
    store = MemoryStore()
    registry = Registry(store)
    await store.open(registry)
    return store, registry


async def test_a_closed_registry_refuses_every_change_and_lease_call_and_still_answers_reads() -> None:
    """Register, register_if, set_member, unregister and the four lease calls (reading a lease too) are ShuttingDown once
    closed, in one place; the reads a reply in flight needs (version, records, incarnation) still answer."""
    store, registry = await _opened()
    lease = await registry.grant_lease("default", 60.0)
    await registry.register(KEY, {"session_id": "s", "weights_info_dict": {}}, lease.id)
    registry.close()
    refused = [
        lambda: registry.register(KEY, {}),
        lambda: registry.register_if(KEY, {}, 1),
        lambda: registry.set_member(LIST, "http://e", present=True),
        lambda: registry.unregister(KEY),
        lambda: registry.grant_lease("default", 60.0),
        lambda: registry.keepalive_lease("default", lease.id),
        lambda: registry.read_lease("default", lease.id),
        lambda: registry.revoke_lease("default", lease.id),
    ]
    for call in refused:
        with pytest.raises(ShuttingDown):
            await call()
    assert await registry.version("default") == 1
    assert [record.rank for record in await registry.records("default", KEY.kind, KEY.role)] == [0]
    [held] = await registry.leases_of([(KEY, None)])
    assert held is not None
    assert held[0] == lease.id
    assert registry.incarnation == store.incarnation
    assert registry.peeks
    assert registry.peek(KEY) is not None
    await store.close()


async def test_a_registry_call_is_the_stores_own_coroutine() -> None:
    """No coroutine of the registry's wraps the store's write: a registration costs one plain call over it."""
    store, registry = await _opened()
    call = registry.register(KEY, {"session_id": "s", "weights_info_dict": {}})
    assert isinstance(call, types.CoroutineType)
    assert call.cr_code is MemoryStore.put.__code__
    record = await call
    assert (await registry.get(KEY)) == record
    await store.close()
