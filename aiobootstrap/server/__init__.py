"""The server floor: the aiohttp app over the registry, and what hosts it.

``app`` builds the application; ``handlers/`` adapts each family of routes to
the registry; the rest of this folder serves them: the record kinds and their
encoders, the pre-built replies, errors, auth, body limits, metrics, the
OpenAPI document, connections, the socket (``bind``, ``server``) and the
thread host. Every use of aiohttp's private API is in ``aiohttp_internals``.
Nothing below this floor imports it, and the client never does.
"""
