"""A rank's transfer-engine info: the body that registers it over HTTP, and its record read or
written straight through a registry, without HTTP."""

from __future__ import annotations

from typing import Any

from aiobootstrap import Registry
from aiobootstrap._names import DEFAULT_NAMESPACE, DEFAULT_ROLE, TRANSFER_ENGINE_INFO
from aiobootstrap.store import Key, LocalStore, MemoryStore, Record, Store


def registration(
    rank: Any, session_id: Any = "10.0.0.7:18000", weights: Any = None, key: str = "rank"
) -> dict[str, Any]:
    return {
        key: rank,
        "transfer_engine_info": {
            "session_id": session_id,
            "weights_info_dict": {"w": [1, 2, 3]} if weights is None else weights,
        },
    }


def info_key(rank: int, namespace: str = DEFAULT_NAMESPACE) -> Key:
    """The key of ``rank``'s transfer-engine info."""
    return Key(namespace, TRANSFER_ENGINE_INFO, DEFAULT_ROLE, rank)


async def register_in(
    registry: Registry, rank: int, session_id: str = "s", weights: dict[str, Any] | None = None
) -> Record:
    """Register ``rank`` in the default namespace straight through the registry, without HTTP."""
    value = {"session_id": session_id, "weights_info_dict": {} if weights is None else weights}
    return await registry.register(info_key(rank), value)


async def stored(registry: Registry, rank: int, namespace: str = DEFAULT_NAMESPACE) -> Record | None:
    """What the store holds for ``rank``'s transfer-engine info."""
    return await registry.get(info_key(rank, namespace))


async def stored_count(registry: Registry, namespace: str = DEFAULT_NAMESPACE) -> int:
    """How many ranks' transfer-engine info the store holds in ``namespace``."""
    return len(await registry.store.records(namespace, TRANSFER_ENGINE_INFO, DEFAULT_ROLE))


async def open_registry(store: Store | None = None, **options: Any) -> Registry:
    """A registry over ``store`` (a new memory store when omitted), listening to its feed."""
    store = store if store is not None else MemoryStore()
    registry = Registry(store, **options)
    await store.open(registry)
    return registry


def peek(registry: Registry, rank: int, namespace: str = DEFAULT_NAMESPACE) -> Record | None:
    """What an in-process store holds for ``rank``, read without awaiting (for ``until``)."""
    store = registry.store
    assert isinstance(store, LocalStore)
    return store.peek(info_key(rank, namespace))
