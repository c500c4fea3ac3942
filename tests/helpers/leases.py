"""Records of every kind on one lease, and the keys they are under."""

from __future__ import annotations

from aiobootstrap._names import ENCODER_URLS, PARALLELISM_CONFIG
from aiobootstrap.core.registry import Registry
from aiobootstrap.store import Key, Record

from .registry import info_key

INFO = {"session_id": "s", "weights_info_dict": {}}


def config_key(rank: int) -> Key:
    return Key("default", PARALLELISM_CONFIG, "draft", rank)


def urls_key() -> Key:
    return Key("default", ENCODER_URLS, "target", 0)


async def lease_every_kind(registry: Registry, lease: str) -> Record:
    """One record of every kind on ``lease``, and an encoder URL on none beside it; the URL list's record."""
    await registry.register(info_key(0), INFO, lease)
    await registry.register(config_key(0), {"tp": 2}, lease)
    listed = await registry.set_member(urls_key(), "http://e1", present=True, lease=lease)
    await registry.set_member(urls_key(), "http://kept", present=True)
    assert listed is not None
    return listed
