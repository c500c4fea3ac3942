"""Where records live: the store interface and its memory, file and Redis implementations.

``open_store`` (in ``_url``) turns a ``--store`` URL into a store; the registry
and the HTTP layer see only :class:`Store`.
"""

from ._base import (
    DEFAULT_ROLE,
    TRANSFER_ENGINE_INFO,
    Change,
    ChangeListener,
    Key,
    Record,
    Store,
    StoreLimits,
)
from ._memory import MemoryStore
from ._url import describe, open_store

__all__ = [
    "DEFAULT_ROLE",
    "TRANSFER_ENGINE_INFO",
    "Change",
    "ChangeListener",
    "Key",
    "MemoryStore",
    "Record",
    "Store",
    "StoreLimits",
    "describe",
    "open_store",
]
