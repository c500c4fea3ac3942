"""Who may do what: every route classified once, and the guard that answers 401 or 403 by it.

:func:`route_access` is the one table: each route (method and path, the
namespaced twin ``/ns/{namespace}/...`` included) is a probe, a read or a
write of one namespace, or a read of the server as a whole. ``create_app``
classifies every route it serves from it, and refuses to build an app with
a route the table does not name: a new route is classified where all the
others are, or the app does not start. A route that changes records (the
lease routes included) is a write; one that shows them (``/watch``, a
lease's read, the page of section 11) is a read.

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

import enum
from collections.abc import Mapping

from aiohttp import web

from .. import wire
from .._names import DEFAULT_NAMESPACE
from ..exceptions import BadRequest
from .errors import json_error
from .faces import kinds as _kinds
from .tokens import Scope, TokenSet

__all__ = ["GUARD", "Access", "Guard", "bearer_credentials", "classify", "route_access"]


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


def route_access() -> dict[tuple[str, str], Access]:
    """The one table: ``(method, path)`` of every route to its :class:`Access`.

    A path is as the default namespace serves it; its ``/ns/{namespace}``
    twin is classified the same. ``HEAD`` is classified as ``GET``.
    """
    read, write = Access.READ, Access.WRITE
    table = {
        ("GET", wire.HEALTH_PATH): Access.PROBE,
        ("GET", wire.READY_PATH): Access.PROBE,
        ("GET", wire.METRICS_PATH): Access.SERVER,
        ("GET", wire.OPENAPI_PATH): Access.SERVER,
        ("GET", wire.NAMESPACES_PATH): Access.SERVER,
        ("GET", wire.RANKS_PATH): read,
        ("POST", wire.ENCODER_REGISTER_PATH): write,
        ("DELETE", wire.ENCODER_UNREGISTER_PATH): write,
        ("GET", wire.ENCODER_LIST_PATH): read,
        ("GET", wire.ENCODER_HEALTH_PATH): read,
        ("GET", wire.WATCH_PATH): read,
        ("GET", wire.PAGE_PATH): read,  # the page holds no records, but reads them with the token
        # A lease is a namespace's: granting, keeping and revoking one change its records' lives.
        ("POST", wire.LEASES_PATH): write,
        ("POST", wire.LEASE_KEEPALIVE_ROUTE): write,
        ("GET", wire.LEASE_ROUTE): read,
        ("DELETE", wire.LEASE_ROUTE): write,
    }
    for kind in _kinds.KINDS:  # read when the app is made: a kind added to the table is classified too
        table[("PUT", kind.register_path)] = write
        table[("DELETE", kind.register_path)] = write
        table[("GET", kind.get_path)] = read
        table[("GET", kind.batch_path)] = read
    return table


_NAMESPACED = wire.path("", "{namespace}")


def classify(router: web.UrlDispatcher) -> dict[web.AbstractRoute, Access]:
    """Every route of ``router`` with its access; ``LookupError`` for a route the table does not name."""
    table = route_access()
    classified: dict[web.AbstractRoute, Access] = {}
    for route in router.routes():
        method = "GET" if route.method == "HEAD" else route.method
        path = route.resource.canonical.removeprefix(_NAMESPACED) if route.resource else ""
        access = table.get((method, path or "/"))
        if access is None:
            raise LookupError(f"{method} {path} has no entry in server/access.py's route_access table")
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
        if not headers:
            if self.open_reads and access is not Access.WRITE:
                return None
            needs = " to change records" if self.open_reads else ""
            return _unauthorized(f"This server requires an Authorization: Bearer token{needs}.")
        if len(headers) > 1:
            # Which one a proxy or a framework would pick differs: refuse rather than guess.
            return _unauthorized("Send exactly one Authorization header.")
        scope = self._scope(headers[0])
        if scope is None:
            return _unauthorized("The bearer token is not valid for this server.")
        if access is Access.SERVER or (access is Access.READ and self.open_reads):
            return None
        namespace = request.match_info.get("namespace", DEFAULT_NAMESPACE)
        try:
            wire.check_namespace(namespace)  # the handler's 400, before a 403 quotes a bad name
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
        scope = self._scope(headers[0]) if len(headers) == 1 else None
        return frozenset() if scope is None else scope.namespaces

    def _scope(self, header: str) -> Scope | None:
        presented = bearer_credentials(header)
        return None if presented is None else self.tokens.lookup(presented)


GUARD = web.AppKey("guard", Guard)
"""The app's token check, when it has tokens: ``BootstrapServer.rotate_tokens`` replaces its set."""
