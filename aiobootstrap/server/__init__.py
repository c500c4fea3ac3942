"""The server floor: the aiohttp app over the registry, and what hosts it.

``app`` builds the application, and the rest of this folder serves it: the
record kinds, the handlers' helpers, auth, limits, metrics, the OpenAPI
document, the socket and the thread host. Nothing below this floor imports it.
"""
