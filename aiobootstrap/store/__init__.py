"""Where records live: the store interface and its memory, file and Redis implementations.

The rooms, each opening with how it works:

- ``interface``: :class:`Store` and its theory of operation, and the change feed's listener
- ``records``: what a store keeps and tells: a :class:`Key`, a :class:`Record`, a :class:`Change`, a lease as read
- ``limits``: :class:`StoreLimits`, and each refusal's sentence, whichever store refuses
- ``tables``: the records of a store kept in this process, the rules of a put, a delete, a limit;
  ``LocalStore``, the reads and lease calls the memory and file stores share
- ``memory``: the memory store, the default
- ``leases``: the lease model of a local store (one heap of deadlines); ``local_leases``: the part a
  local store owns for its lease calls and their one timer
- ``file``: the file store, over ``journal`` (the file's format and I/O), ``entries`` (records as
  its lines, and a journal replayed) and ``staging`` (changes on their way to disk)
- ``redis``: the Redis store, a package of its own rooms
- ``url``: ``open_store``, a ``--store`` URL to a store; ``redacted``, a URL fit for a log line

The registry and the HTTP layer see only :class:`Store`; nothing here imports
the wire or the server.
"""

from .._names import DEFAULT_ROLE
from .interface import ABSENT, ChangeListener, Store
from .limits import StoreLimits
from .members import MAX_MEMBERS, MEMBERS, members_of, with_member
from .memory import MemoryStore
from .records import MAX_NAME_LENGTH, NO_RANK, Change, HeldLease, Key, LeaseState, Record, check_key_name
from .tables import LocalStore
from .url import describe, open_store

__all__ = [
    "ABSENT",
    "DEFAULT_ROLE",
    "MAX_MEMBERS",
    "MAX_NAME_LENGTH",
    "MEMBERS",
    "NO_RANK",
    "Change",
    "ChangeListener",
    "HeldLease",
    "Key",
    "LeaseState",
    "LocalStore",
    "MemoryStore",
    "Record",
    "Store",
    "StoreLimits",
    "check_key_name",
    "describe",
    "members_of",
    "open_store",
    "with_member",
]
