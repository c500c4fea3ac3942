"""The client floor: ``BootstrapClient``, its transport and retries, and the blocking ``SyncBootstrapClient``.

``client`` is the public API, one class listing every call; each face's calls
are written in its module, as functions of the transport (``engine_info``,
``encoders``, ``prefill``, ``metadata``, ``native``; its ``leases`` and
``watch``); ``calls`` is the request path they share (a per-rank kind's
register, unregister and gets); ``transport`` sends a request across replicas
and restarts, with ``exchange`` (one request to one URL), ``retry`` (backoff,
deadlines) and ``restarts`` (boot ids, replays); ``sync`` is the blocking
client on a loop thread. It shares the wire with the server through
``aiobootstrap.wire``'s modules and imports nothing of the server or the store.
"""
