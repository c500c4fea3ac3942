"""The wire format, shared by the server and the client, imported by module.

Everything both ends must agree on lives under this folder and nowhere else,
and each caller imports the module that holds a name
(``from ..wire.params import parse_ranks``), so a reader sees where it lives:

- ``routes``: the paths, the namespace prefix, the limits both ends size requests by;
- ``params``: the query parsers, and the client's query builders that match them;
- ``bodies``: the request bodies, both ways, and the nesting check;
- ``errors``: the ``{"detail": ...}`` replies, "not registered" told from any other 404;
- ``results``: the public result types and their decoders, read through ``reading``;
- ``kinds``: what a client needs of each per-rank kind (``KindRoutes``);
- ``leases``, ``watch``: the lease routes and bodies; ``/watch``'s changes, replies and SSE framing;
- ``encoder_health``, ``prefill`` (with ``prefill_fields``, the fields a release adds, passed through,
  and ``prefill_rooms``, the bootstrap rooms), ``metadata``, ``vllm``: the encoders' health reply,
  SGLang's prefill bootstrap, Mooncake's metadata protocol and vLLM's Mooncake connector bootstrap;
- ``listeners``: ``/namespaces``' fields naming the ``--listen`` listeners.

Nothing here does I/O, imports aiohttp or knows the store. On the server's
side a malformed value raises :class:`~aiobootstrap.exceptions.BadRequest`
naming the field; on the client's side a reply the protocol does not allow
raises :class:`~aiobootstrap.exceptions.UnexpectedReply`.
"""
