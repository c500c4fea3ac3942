"""The etcd store: any number of replicas share one registry kept in an etcd v3 cluster.

Its rooms, each opening with how it works:

- ``store``: :class:`EtcdStore`, the store interface over the others.
- ``keys``: the key schema (every key under one prefix) and how records, namespaces and changes are kept.
- ``txn``: the state a namespace's writes read, and the plan they fill.
- ``namespaces``: a namespace's waiting writes, one transaction a batch, committed only if the namespace is as read.
- ``reads``: the gets of one loop turn, read in one round trip.
- ``records``: the decisions of the record writes (put, delete, a set member, a lease's release).
- ``feed``: the change feed from etcd's watch, the boot id, the watchdog.
- ``leases``: leases as etcd leases, and their release when etcd ends them.
- ``connection``: aetcd's clients, one per member, one deadline per call, every failure mapped once.
- ``messages``: etcd's transactions and lease calls in aetcd's protobuf messages.

Without the ``etcd`` extra this package still imports: :func:`etcd_missing`
says the extra is absent, and :class:`EtcdStore` refuses to be made.
"""

from .connection import etcd_missing
from .store import EtcdStore

__all__ = ["EtcdStore", "etcd_missing"]
