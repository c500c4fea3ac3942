"""What a face is: one protocol's routes on the core, declared as one unit (:class:`Face`).

A face (``faces/<name>/``) declares, in its ``face.py``, everything the app
needs of it: its routes, the :class:`Access` of each (one table of
:class:`Route` entries, :meth:`Face.of_routes`, where each is written by hand), its
OpenAPI paths and schemas, its settings, its record kinds (``kind_spec.KindSpec``: how a get of each
is encoded, whether ``/watch`` lists it, whether it is a set, its cap), what ``/metrics`` and
``/namespaces`` count of its records (``figures``, ``counts``), and its start-up and cleanup, if any.
``face_registry`` finds the installed faces; ``create_app`` routes them (each also under
``/ns/{namespace}``) and builds one kind table from theirs (``appkeys.KIND_TABLE``),
``access.route_access`` classifies their routes from their declarations and
``openapi.document`` describes them from theirs. A new face is a new folder
(or another package's entry point): nothing else is edited.

This module sits below the faces and below ``access``, ``auth`` and
``openapi``, which all read it; it imports only ``kind_spec`` and the fast path's responder
(``fastpath.replies``, ``fastpath.responder``) of the package.
"""

from __future__ import annotations

import argparse
import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from .fastpath.replies import FaceHandler
from .fastpath.responder import responding
from .kind_spec import KindFigures, KindSpec, NamespaceCount

if TYPE_CHECKING:
    from ..core.registry import Registry
    from .config import ServerConfig

__all__ = ["Access", "CleanupContext", "ExpectHandler", "Face", "FaceSettings", "Route", "RouteAccess"]


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


@dataclass(frozen=True, slots=True)
class Route:
    """One route of a face, its method and path written once: its handler and its :class:`Access`."""

    method: str
    path: str
    handler: FaceHandler
    """It returns a typed reply (``fastpath.replies``), which the fast path's one responder writes."""
    access: Access

    def definition(self, expect: ExpectHandler | None) -> web.RouteDef:
        handler = responding(self.handler)
        if self.method == "GET":  # web.get: HEAD answered too
            return web.get(self.path, handler, expect_handler=expect)
        return web.route(self.method, self.path, handler, expect_handler=expect)


class FaceSettings(Protocol):
    """What a face's settings class offers the command line (``Face.settings``): a frozen dataclass whose
    every field has a default, validated in its ``__post_init__`` (a one-line ``ValueError``)."""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add its options to ``serve``'s parser (each default in its help)."""

    @classmethod
    def from_arguments(cls, args: argparse.Namespace, environ: Mapping[str, str]) -> Any:
        """The settings the parsed ``args`` ask for; its engine's variables in ``environ`` where an option
        is not given."""


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
    kinds: tuple[KindSpec, ...] = ()
    """The record kinds it owns: how a get of each is encoded, whether it is listed, a set, capped."""
    figures: Callable[[Registry, str, ServerConfig], Awaitable[Sequence[KindFigures]]] | None = None
    """What ``/metrics`` counts of its records in a namespace, per kind and role (``None``: nothing); the
    host adds each kind and role with gets parked, and their oldest waits."""
    counts: tuple[NamespaceCount, ...] = ()
    """Its named counts of a namespace: ``/namespaces``' fields, and gauges of ``/metrics``."""
    settings: type[FaceSettings] | None = None
    """Its settings class (a frozen dataclass whose every field has a default, :class:`FaceSettings`): its
    command line options, read into ``ServerConfig.settings``; the face reads them with
    ``app[CONFIG].settings_of(ItsSettings)``. ``None``: it has none."""
    order: int = 100
    """Where it is served among the faces, lower first (ties by name): the order of the routes, of the
    OpenAPI paths and of what the page and ``/metrics`` show."""
    always: bool = False
    """Served whatever ``--faces`` names: the routes every record relies on, whichever face wrote it (the
    native face's health probe, ``/watch``, leases and page), which a server of one engine's face keeps."""
    page_script: Callable[[], str] | None = None
    """Its section of the page (``GET /``): the text of a script that pushes its section to
    ``aiobootstrap.sections``, run after the page's own (``bringup_page``). ``None``: the ``page.js`` its
    folder ships, if any (``faces/<name>/page.js``; another package's face reads its own with
    ``bringup_page.folder_script(__package__)``)."""

    @classmethod
    def of_routes(cls, name: str, table: Callable[[], Sequence[Route]], **parts: Any) -> Face:
        """A face whose routes and their access come from one table of :class:`Route`s (``parts``: the
        other fields)."""

        def routes(expect: ExpectHandler | None) -> list[web.RouteDef]:
            return [route.definition(expect) for route in table()]

        def access() -> RouteAccess:
            return {(route.method, route.path): route.access for route in table()}

        return cls(name, routes, access, **parts)
