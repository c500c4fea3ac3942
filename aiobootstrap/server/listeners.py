"""A listener per deployment (``--listen [HOST:]PORT=NAMESPACE``, SPEC section 17): a port whose
unprefixed routes are one namespace's, for the engines that name their server by ``host:port`` alone.

How it works. A listener is one more listening socket of the same runner and the same app as the main
port's. The server hands each request to the app through :func:`route_by_port`, before the app resolves its
route: a request that came in on a listener's port (its connection's local port, each port the server's
own) goes on as a copy (``request.clone``) whose path is under ``/ns/NAME/``. So the app's router, the token
check, the faces and the page see the namespace's ``/ns/{namespace}`` twin route, exactly as for a client
that asked the main port for ``/ns/NAME/...``: a token's scope applies per namespace as it does there, and
no face knows a listener. A request on the main port pays one look at its local port.

What a listener serves, and what it refuses:

- its namespace's every route, unprefixed, and under its own ``/ns/NAME/`` as well;
- ``/ready`` and ``/openapi.json`` as the main port does, and ``/namespaces`` with its namespace alone
  (and ``"listener"``: the namespace this port serves);
- another namespace's ``/ns/OTHER/...`` and ``/metrics`` (the whole server's) are a ``404`` that names the
  listener's namespace, with nothing read: a port is one deployment's, and a port a firewall opens to one
  tenant reaches that tenant's deployment alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from aiohttp import web
from yarl import URL

from ..wire.routes import METRICS_PATH, NAMESPACE_PREFIX, SERVER_WIDE_PATHS
from .aiohttp_internals import Handle
from .errors import json_error

__all__ = ["LISTENING", "Listening", "listener_of", "route_by_port"]


@dataclass(frozen=True, slots=True)
class Listening:
    """The server's listeners of one namespace each: ``(namespace, url)`` in the order ``--listen`` gave
    them, and the namespace of each port (its real one, when 0 asked the system to choose)."""

    listeners: tuple[tuple[str, str], ...]
    ports: Mapping[int, str]


LISTENING = web.AppKey("listening", Listening)
"""The app's listeners, when the server has any (``BootstrapServer`` sets it before it serves)."""


def local_port(request: web.BaseRequest) -> int | None:
    """The port of this server that ``request`` came in on (``None``: its connection is gone)."""
    transport = request.transport
    sockname = None if transport is None else transport.get_extra_info("sockname")
    return sockname[1] if isinstance(sockname, tuple) and len(sockname) > 1 else None


def listener_of(request: web.BaseRequest) -> str | None:
    """The namespace of the listener ``request`` came in on; ``None`` for the main port."""
    listening = request.app.get(LISTENING) if isinstance(request, web.Request) else None
    if listening is None:
        return None
    port = local_port(request)
    return None if port is None else listening.ports.get(port)


def route_by_port(ports: Mapping[int, str]) -> Callable[[Handle], Handle]:
    """What wraps the server's request handler (``aiohttp_internals.wrap_request_handler``): a request on
    a port of ``ports`` goes to the app as its namespace's (see the module's notes)."""

    def wrap(handle: Handle) -> Handle:
        async def routed(request: web.BaseRequest) -> web.StreamResponse:
            port = local_port(request)
            namespace = None if port is None else ports.get(port)
            if namespace is None:
                return await handle(request)
            target = _target(request, namespace)
            if isinstance(target, str):
                return json_error(404, target)
            if target is request:
                return await handle(request)
            try:
                response = await handle(target)
            except web.HTTPException as exc:  # a redirect a handler raised: aiohttp writes it
                await _prepare(exc, target, namespace)
                raise
            await _prepare(response, target, namespace)
            return response

        return routed

    return wrap


def _target(request: web.BaseRequest, namespace: str) -> web.BaseRequest | str:
    """The request the app is handed for ``request`` on ``namespace``'s port: itself (a server-wide route,
    or one under its own ``/ns/NAME/``), a copy under ``/ns/NAME/``, or the refusal's detail."""
    url = request.rel_url
    path = url.path
    if path == METRICS_PATH:
        return f"This port serves namespace {namespace} alone (--listen): /metrics is the main port's."
    if path in SERVER_WIDE_PATHS:
        return request
    if path.startswith(NAMESPACE_PREFIX):
        if path[len(NAMESPACE_PREFIX) :].partition("/")[0] == namespace:
            return request
        return (
            f"This port serves namespace {namespace} alone (--listen): ask the main port for another "
            "namespace's routes."
        )
    prefixed = URL.build(
        path=f"{NAMESPACE_PREFIX}{namespace}{url.raw_path}", query_string=url.raw_query_string, encoded=True
    )
    return request.clone(rel_url=prefixed)


async def _prepare(response: web.StreamResponse, request: web.BaseRequest, namespace: str) -> None:
    """Prepare ``response`` with the routed copy: aiohttp prepares it with the request it made, which was
    never routed, so the app's ``on_response_prepare`` (the boot header) would not run for it. A redirect
    (a trailing ``/``) points at the path the client asked, without the ``/ns/NAME`` it never sent."""
    if response.prepared:
        return
    if 300 <= response.status < 400:  # the status first: a pre-built reply's headers are made when read
        location = response.headers.get("Location", "")
        if location.startswith(f"{NAMESPACE_PREFIX}{namespace}/"):
            response.headers["Location"] = location[len(NAMESPACE_PREFIX) + len(namespace) :]
    try:
        await response.prepare(request)
    except ConnectionError:
        pass  # the client went: aiohttp, writing the rest, finds it so and closes the connection
