"""Where records live: the store interface and its memory, file and Redis implementations.

``open_store`` (in ``_url``) turns a ``--store`` URL into a store; the registry
and the HTTP layer see only :class:`Store`.
"""

from .interface import (
    DEFAULT_ROLE,
    MAX_MEMBERS,
    MEMBERS,
    TRANSFER_ENGINE_INFO,
    Change,
    ChangeListener,
    Key,
    Record,
    Store,
    StoreLimits,
    members_of,
    with_member,
)
from .memory import MemoryStore
from .tables import LocalStore
from .url import describe, open_store

__all__ = [
    "DEFAULT_ROLE",
    "MAX_MEMBERS",
    "MEMBERS",
    "TRANSFER_ENGINE_INFO",
    "Change",
    "ChangeListener",
    "Key",
    "LocalStore",
    "MemoryStore",
    "Record",
    "Store",
    "StoreLimits",
    "describe",
    "members_of",
    "open_store",
    "with_member",
]
