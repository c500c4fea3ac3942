"""Who may do what: every route classified once, and the guard that answers 401 or 403 by it.

:func:`route_access` is the one table: each route (method and path, the
namespaced twin ``/ns/{namespace}/...`` included) is a probe, a read or a
write of one namespace, or a read of the server as a whole. It is assembled
from the server's own routes (:data:`SERVER_ROUTES`) and what each face
declares of its routes (``Face.access``, in the face's folder).
``create_app`` classifies every route it serves from it, and refuses to
build an app with a route the table does not name: a new route is
classified where its face declares it, or the app does not start. A route
that changes records (the lease routes included) is a write; one that shows
them (``/watch``, a lease's read, the page of section 11) is a read.

:class:`Guard` decides, before any handler runs (so nothing is read or
changed by a refused request):

- no ``Authorization``: a probe or, with open reads, a read answers; else ``401``;
- a token not in the set (or two headers): ``401``, whatever the route;
- a known token outside its scope: ``403``, saying what it may not do;
- a read of the server as a whole (``/metrics``, ``/openapi.json``, ``/namespaces``) needs
  only a known token; what it lists of namespaces is filtered to the token's
  (:meth:`Guard.listed`).

A token never gets less than no token: with open reads a scoped token reads
every namespace, as anyone may.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiohttp import web

from .._names import DEFAULT_NAMESPACE
from ..exceptions import BadRequest
from ..wire import routes
from ..wire.routes import METRICS_PATH, NAMESPACES_PATH, OPENAPI_PATH, READY_PATH, check_namespace
from .errors import json_error
from .face import Access, Face
from .tokens import Scope, TokenSet

__all__ = ["GUARD", "SERVER_ROUTES", "Access", "Guard", "bearer_credentials", "classify", "route_access"]


SERVER_ROUTES = {
    ("GET", READY_PATH): Access.PROBE,
    ("GET", METRICS_PATH): Access.SERVER,
    ("GET", OPENAPI_PATH): Access.SERVER,
    ("GET", NAMESPACES_PATH): Access.SERVER,
}
"""The routes the server serves once for the whole server, beside its faces' (``create_app``'s own)."""


def route_access(faces: Sequence[Face]) -> dict[tuple[str, str], Access]:
    """The one table: ``(method, path)`` of every route of the server and of ``faces`` to its :class:`Access`.

    A path is as the default namespace serves it; its ``/ns/{namespace}``
    twin is classified the same. ``HEAD`` is classified as ``GET``. Each
    face's part is read now (the engine-info face's from the kind table as it
    is); a route two of them claim is a ``ValueError``.
    """
    table = dict(SERVER_ROUTES)
    for face in faces:
        for route, access in face.access().items():
            if route in table:
                raise ValueError(f"{' '.join(route)} is declared twice (again by the {face.name} face)")
            table[route] = access
    return table


_NAMESPACED = routes.path("", "{namespace}")


def classify(router: web.UrlDispatcher, faces: Sequence[Face]) -> dict[web.AbstractRoute, Access]:
    """Every route of ``router`` with its access; ``LookupError`` for a route the table does not name."""
    table = route_access(faces)
    classified: dict[web.AbstractRoute, Access] = {}
    for route in router.routes():
        method = "GET" if route.method == "HEAD" else route.method
        path = route.resource.canonical.removeprefix(_NAMESPACED) if route.resource else ""
        access = table.get((method, path or "/"))
        if access is None:
            raise LookupError(f"{method} {path} has no Access: no face declares it, nor access.SERVER_ROUTES")
        classified[route] = access
    return classified


def bearer_credentials(header: str) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header (the scheme in any case), else ``None``."""
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    # surrogatepass: header text the parser could not decode still encodes, never raises.
    return credentials.strip().encode("utf-8", "surrogatepass")


def _unauthorized(detail: str) -> web.Response:
    return json_error(401, detail, {"WWW-Authenticate": 'Bearer realm="aiobootstrap"'})


class Guard:
    """The token check of one app: the tokens in force, whether reads are open, its routes' access.

    ``tokens`` may be replaced at any time (a rotation): the next request is
    checked against the new set; requests already let in are not looked at
    again. ``routes`` is set once the app's routes are (see :func:`classify`).
    """

    def __init__(self, tokens: TokenSet, *, open_reads: bool) -> None:
        self.tokens = tokens
        self.open_reads = open_reads
        self.routes: Mapping[web.AbstractRoute, Access] = {}

    def access(self, request: web.Request) -> Access:
        # A request no route matched (its 404 or 405 to come) is asked for a token as the server's reads are.
        return self.routes.get(request.match_info.route, Access.SERVER)

    def refusal(self, request: web.Request) -> web.Response | None:
        """The ``401`` or ``403`` for ``request``, or ``None`` to let it through."""
        access = self.access(request)
        if access is Access.PROBE:
            return None
        headers = request.headers.getall("Authorization", [])
        anonymous = self.tokens.anonymous
        if not headers:
            if self.open_reads and access is not Access.WRITE:
                return None
            if anonymous is None or access is Access.SERVER or not _names_covered(request, anonymous):
                needs = " to change records" if self.open_reads else ""
                return _unauthorized(f"This server requires an Authorization: Bearer token{needs}.")
            scope = anonymous  # the token file's "*": requests without a token, in its namespaces
        elif len(headers) > 1:
            # Which one a proxy or a framework would pick differs: refuse rather than guess.
            return _unauthorized("Send exactly one Authorization header.")
        else:
            found = self._scope(headers[0])
            if found is None:
                return _unauthorized("The bearer token is not valid for this server.")
            scope = found
        if access is Access.SERVER or (access is Access.READ and self.open_reads):
            return None
        namespace = request.match_info.get("namespace", DEFAULT_NAMESPACE)
        try:
            check_namespace(namespace)  # the handler's 400, before a 403 quotes a bad name
        except BadRequest as exc:
            return json_error(exc.status, exc.detail)
        verb = "write to" if access is Access.WRITE else "read"
        if not scope.covers(namespace):
            return json_error(
                403, f"This token may not {verb} namespace {namespace}: it covers {scope.describe()}."
            )
        if access is Access.WRITE and scope.read_only:
            return json_error(403, f"This token may only read: it may not write to namespace {namespace}.")
        return None

    def listed(self, request: web.Request) -> frozenset[str] | None:
        """The namespaces a listing may show to ``request`` (already let in); ``None`` for every one."""
        if self.open_reads:
            return None
        headers = request.headers.getall("Authorization", [])
        if not headers and self.tokens.anonymous is not None:
            return self.tokens.anonymous.namespaces
        scope = self._scope(headers[0]) if len(headers) == 1 else None
        return frozenset() if scope is None else scope.namespaces

    def _scope(self, header: str) -> Scope | None:
        presented = bearer_credentials(header)
        return None if presented is None else self.tokens.lookup(presented)


GUARD = web.AppKey("guard", Guard)
"""The app's token check, when it has tokens: ``BootstrapServer.rotate_tokens`` replaces its set."""


def _names_covered(request: web.Request, scope: Scope) -> bool:
    """Whether ``request`` addresses a namespace ``scope`` covers (a request without a token is let into no
    other: it is told a token is needed, as everywhere else, not which namespaces are open)."""
    return scope.covers(request.match_info.get("namespace", DEFAULT_NAMESPACE))
