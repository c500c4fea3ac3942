"""The server floor: the aiohttp app over the registry, and what hosts it.

``app`` builds the application from the faces (``faces/``: each engine's
protocol, declared as a ``face.Face``) and the fast path (``fastpath/``:
replies written as pre-built bytes); the rest of this folder is the host:
the one front middleware, errors, auth and scopes, body limits, metrics, the
OpenAPI document, connections, the socket (``bind``, ``server``) and the
thread host. Every use of aiohttp's private API is in ``aiohttp_internals``.
Nothing below this floor imports it, and the client never does.
"""
