"""The client floor: ``BootstrapClient``, its transport and retries, and the blocking ``SyncBootstrapClient``.

``client`` is the public API; ``calls`` the one request path every kind of
record takes; ``transport`` sends a request across replicas and restarts,
with ``retry`` (backoff, deadlines) and ``restarts`` (boot ids, replays);
``sync`` is the blocking client on a loop thread. It shares the wire with the
server through ``aiobootstrap.wire`` and imports nothing of the server or the
store.
"""
