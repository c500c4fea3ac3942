"""The memory store: the embedded default, one process, gone when it ends.

Records sit in :class:`~aiobootstrap.store.tables.Tables`, one dict per
(namespace, kind, role), so the rank cap is that dict's length. Every method
runs to completion without yielding, so each is atomic on the event loop: a
count checked and a write made happen with nothing in between. The feed is a direct call to the listener after the
change, carrying the record itself. Leases are ``local_leases``'s (the
part :class:`~.tables.LocalStore` owns): a write attaches its record to its
lease (or to none) in the same step.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from .interface import ABSENT, ChangeListener, ignore_changes
from .limits import StoreLimits
from .members import with_member
from .records import Change, Key, Record
from .tables import LocalStore

__all__ = ["MemoryStore"]


class MemoryStore(LocalStore):
    """Records in memory: fast, and gone when the process ends."""

    def __init__(self, limits: StoreLimits | None = None) -> None:
        super().__init__(limits)
        self._listener = ignore_changes()
        self._incarnation = secrets.token_hex(8)

    @property
    def incarnation(self) -> str:
        return self._incarnation

    @property
    def description(self) -> str:
        return "memory"

    async def open(self, listener: ChangeListener) -> None:
        self._listener = listener

    async def close(self) -> None:
        await self._lease_calls.close()
        self._listener = ignore_changes()

    async def put(self, key: Key, value: dict[str, Any], lease: str | None = None) -> Record:
        held = None if lease is None else self._leases.find(key.namespace, lease)
        record = self._write(key, value)
        self._leases.attach((record.key, None), held)
        return record

    async def put_if(
        self, key: Key, value: dict[str, Any], version: int, lease: str | None = None
    ) -> Record | None:
        # Nothing here yields: the comparison and the write are one step.
        current = self._tables.get(key)
        if (ABSENT if current is None else current.version) != version:
            return None
        return await self.put(key, value, lease)

    def _write(self, key: Key, value: dict[str, Any], member: str | None = None) -> Record:
        record = self._tables.put_next(key, value, time.time())
        self._listener.changed((Change(record.key, record.version, record, False, member),))
        return record

    async def set_member(
        self, key: Key, member: str, *, present: bool, lease: str | None = None
    ) -> Record | None:
        held = None if lease is None or not present else self._leases.find(key.namespace, lease)
        # Nothing here yields: the read and the write are one step.
        current = self._tables.get(key)
        value = with_member(None if current is None else current.value, member, present=present)
        marked = ("+" if present else "-") + member
        record = current if value is None else self._write(key, value, marked)
        self._leases.attach((key, member), held)
        return record

    async def delete(self, key: Key) -> Record | None:
        tables = self._tables
        if tables.get(key) is None:
            return None
        version = tables.next_version(key.namespace)
        removed = tables.apply_delete(key, version)
        self._leases.attach((key, None), None)
        self._listener.changed((Change(key, version, deleted=True),))
        return removed

    async def ping(self) -> None:
        pass
