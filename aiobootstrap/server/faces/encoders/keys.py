"""Where a namespace's encoder URL list is kept, and what it holds.

The list is a set of strings with a version, kept as one record
(``ENCODER_URLS``, rank 0, role ``target``) whose members the store changes
atomically (:meth:`~aiobootstrap.store.Store.set_member`): the face declares
the kind a set (``KindSpec.members``). Waiting for the list to change is
waiting for that record's next version.
"""

from __future__ import annotations

from ...._names import DEFAULT_ROLE, ENCODER_URLS
from ....store import Key, Record, members_of

__all__ = ["encoder_list_key", "encoder_urls"]


def encoder_list_key(namespace: str) -> Key:
    """The key of ``namespace``'s encoder URL list."""
    return Key(namespace, ENCODER_URLS, DEFAULT_ROLE, 0)


def encoder_urls(record: Record | None) -> list[str]:
    """The URLs of an encoder list record, in order of first registration."""
    return members_of(None if record is None else record.value)
