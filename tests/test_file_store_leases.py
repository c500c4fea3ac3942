"""Leases in the file store: granted, held and ended in the journal, and every lease renewed by a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from aiobootstrap import Registry
from aiobootstrap._names import ENCODER_URLS, PARALLELISM_CONFIG
from aiobootstrap.exceptions import LeaseNotFound
from aiobootstrap.store import Key
from aiobootstrap.store.file import FileStore

from .helpers.registry import info_key, open_registry
from .helpers.waits import until

INFO = {"session_id": "s", "weights_info_dict": {}}
URLS = Key("default", ENCODER_URLS, "target", 0)
CONFIG = Key("default", PARALLELISM_CONFIG, "target", 0)


async def _open(path: Path) -> tuple[FileStore, Registry]:
    store = FileStore(str(path))
    return store, await open_registry(store)


async def test_a_restart_brings_back_every_lease_and_its_records_with_a_full_ttl(tmp_path: Path) -> None:
    """A lease whose TTL passed while the server was down is not expired: it has its full TTL from the restart."""
    path = tmp_path / "state"
    store, registry = await _open(path)
    lease = await store.grant_lease("default", 0.3)
    other = await store.grant_lease("blue", 60)
    await registry.register(info_key(0), INFO, lease.id)
    await registry.register(CONFIG, {"tp": 1}, lease.id)
    await registry.set_member(URLS, "http://e1", present=True, lease=lease.id)
    await registry.set_member(URLS, "http://e2", present=True, lease=lease.id)
    await registry.set_member(URLS, "http://e2", present=True)  # moved off the lease: a hold line
    await store.close()
    await asyncio.sleep(0.4)  # the TTL passes while no server runs

    store, _ = await _open(path)
    state = await store.read_lease("default", lease.id)
    assert state.remaining > 0.1
    assert set(state.records) == {(info_key(0), None), (CONFIG, None), (URLS, "http://e1")}
    assert (await store.read_lease("blue", other.id)).ttl == 60
    # Then, not kept alive, it expires: its records go, the moved member stays.
    await until(lambda: store.peek(info_key(0)) is None and store.peek(CONFIG) is None)
    await until(lambda: (r := store.peek(URLS)) is not None and r.value == {"members": ["http://e2"]})
    await store.close()

    store, _ = await _open(path)  # the expiry was journaled: nothing comes back
    with pytest.raises(LeaseNotFound):
        await store.read_lease("default", lease.id)
    assert store.peek(info_key(0)) is None
    assert len(store.lease_table) == 1
    await store.close()


async def test_a_revoked_lease_stays_revoked_and_moved_records_stay_moved(tmp_path: Path) -> None:
    path = tmp_path / "state"
    store, registry = await _open(path)
    first = await store.grant_lease("default", 60)
    second = await store.grant_lease("default", 60)
    await registry.register(info_key(1), INFO, first.id)
    await registry.register(info_key(2), INFO, first.id)
    await registry.register(info_key(2), INFO, second.id)
    await registry.register(info_key(3), INFO, second.id)
    await registry.register(info_key(3), INFO)  # off every lease
    await store.revoke_lease("default", first.id)
    await store.close()
    for _ in range(2):  # the first open replays the lines; the second reads what its compaction wrote
        store, _ = await _open(path)
        assert store.peek(info_key(1)) is None
        assert (await store.read_lease("default", second.id)).records == ((info_key(2), None),)
        assert store.peek(info_key(3)) is not None
        with pytest.raises(LeaseNotFound):
            await store.read_lease("default", first.id)
        await store.close()


async def test_an_unknown_lease_writes_no_line(tmp_path: Path) -> None:
    path = tmp_path / "state"
    store, registry = await _open(path)
    before = path.stat().st_size
    with pytest.raises(LeaseNotFound):
        await registry.register(info_key(0), INFO, "nope")
    with pytest.raises(LeaseNotFound):
        await registry.set_member(URLS, "http://e", present=True, lease="nope")
    assert path.stat().st_size == before
    await store.close()
