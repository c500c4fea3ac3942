"""The request handlers: thin adapters from a request to the registry and back.

``per_kind`` registers, deletes and gets every per-rank record kind (one set
of handlers, made for each entry of ``kinds.KINDS``); ``encoder_urls`` keeps
the encoder URL list; ``status`` answers the probes and the ``/ranks``
listing; ``log_lines`` writes the one log line of each change; ``common``
holds what they all read from a request and the plain replies they send.
``app`` puts them on their routes.
"""
