"""The Redis store: any number of replicas share one registry kept in Redis.

Its rooms, each opening with how it works:

- ``store``: :class:`RedisStore`, the store interface over the others.
- ``keys``: the key schema (every key under one hash tag) and how a record is kept.
- ``lua``: the scripts; each write is one of them, atomic in Redis.
- ``batcher``: the commands of one loop turn sent in one pipeline, reads and writes alike.
- ``feed``: the change feed's reader, this process's own writes heard once, the watcher of restarts.
- ``connection``: redis-py, the two pools, one deadline per call, every failure mapped once.
- ``durability``: the warning when Redis can lose what it acknowledged.

Without the ``redis`` extra this package still imports: :func:`redis_missing`
says the extra is absent, and :class:`RedisStore` refuses to be made.
"""

from .connection import redis_missing
from .store import RedisStore

__all__ = ["RedisStore", "redis_missing"]
