"""The client floor: ``BootstrapClient``, its transport and retries, and the blocking ``SyncBootstrapClient``.

It shares the wire with the server through ``aiobootstrap.wire`` and imports
nothing of the server or the store.
"""
