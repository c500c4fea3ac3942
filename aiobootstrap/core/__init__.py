"""The core: records that a reader can wait for and watch, over any store; no HTTP, no engine's wire.

``registry`` is the only way to the records: reads, writes, waits (one key, a
set of ranks or of keys, a condition over a namespace's kind), subscriptions to
a kind's changes, and leases, each write checked against a stopping registry.
``history`` keeps each namespace's recent changes for watchers; ``parking``
counts the waits and watches parked; ``tally`` is a count a reader can await;
``subscribers`` is how each of them tells its host what happened (deliveries,
changed namespaces, a tally's steps), to every subscriber in turn.
The stores (``aiobootstrap.store``) sit below; the faces (``server.faces``)
sit above and reach the records only through the registry.
"""
