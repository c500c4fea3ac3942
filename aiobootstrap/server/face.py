"""What a face is: one protocol's routes on the core, declared as one unit (:class:`Face`).

A face (``faces/<name>/``) declares, in its ``face.py``, everything the app
needs of it: its routes, the :class:`Access` of each, its OpenAPI paths and
schemas, and its start-up and cleanup, if any. ``faces.FACES`` lists the
app's faces; ``create_app`` routes them (each also under ``/ns/{namespace}``),
``access.route_access`` classifies their routes from their declarations and
``openapi.document`` describes them from theirs. A new face is a new folder
and one entry in ``FACES``: nothing else is edited.

This module sits below the faces and below ``access``, ``auth`` and
``openapi``, which all read it; it imports nothing of the package.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

__all__ = ["Access", "CleanupContext", "ExpectHandler", "Face", "RouteAccess"]


class Access(enum.Enum):
    """What a route does, as far as a token's scope is concerned."""

    PROBE = "probe"
    """Anyone, always: the probes say nothing of the records."""
    READ = "read"
    """Shows a namespace's records."""
    WRITE = "write"
    """Changes a namespace's records."""
    SERVER = "server"
    """Shows the server as a whole; any known token (anyone, with open reads)."""


ExpectHandler = Callable[[web.Request], Awaitable[web.StreamResponse | None]]
"""What aiohttp calls for a request with ``Expect: 100-continue`` (``auth.expect_handler`` makes the app's)."""

RouteAccess = Mapping[tuple[str, str], Access]
"""``(method, path)`` of routes to their :class:`Access`; a path as the default namespace serves it."""

CleanupContext = Callable[[web.Application], AsyncIterator[None]]
"""An ``app.cleanup_ctx`` step: its start-up up to its ``yield``, its cleanup after."""


def _nothing() -> dict[str, Any]:
    return {}


@dataclass(frozen=True, slots=True)
class Face:
    """One protocol's adapters on the core, as the app needs them.

    Each part is a function called when the app (or its description) is
    made, so that a face made from a table (the record kinds) follows the
    table as it is then.
    """

    name: str
    """Its folder's name, for the reader and the error messages."""
    routes: Callable[[ExpectHandler | None], Sequence[web.RouteDef]]
    """Its routes, each given the app's expect handler; the app adds each one's ``/ns/{namespace}`` twin."""
    access: Callable[[], RouteAccess]
    """The :class:`Access` of each of its routes (its twins are classified the same; ``HEAD`` as ``GET``)."""
    paths: Callable[[], Mapping[str, dict[str, Any]]] = _nothing
    """Its OpenAPI path items, by path as the default namespace serves it (the twins are described from them)."""
    schemas: Callable[[], Mapping[str, Any]] = _nothing
    """The OpenAPI component schemas its paths refer to (the shared ones, such as ``Error``, are the server's)."""
    contexts: tuple[CleanupContext, ...] = ()
    """Its ``cleanup_ctx`` steps: run after the registry is open, before the fast path subscribes."""
