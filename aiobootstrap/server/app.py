"""The app factory: an aiohttp app that adapts requests to the registry, and its start and stop.

It knows nothing of sockets or signals (see ``server``): a test drives it
with ``aiohttp_client(create_app(config))``. The handlers are the faces'
(``faces/``, each declared as a ``face.Face``, found by ``face_registry``):
the app serves each face's routes and their ``/ns/{namespace}`` twins, and
runs its start-up; the routes served once for the whole server are its
own. The one front middleware is in ``front`` (its error replies in ``errors``), the pre-built replies in
``fastpath/``.

Start and stop: ``cleanup_ctx`` opens the store and makes the registry and
the pre-built replies, and closes the store last; its last step
(:func:`_fast_path_context`) is the one place the fast path subscribes to
what the core publishes, and decides whether replies may be pre-built. :func:`release_waiters` is
the one way parked waits are let go, run by ``on_shutdown`` (so before
aiohttp waits for the requests in flight), or earlier by a
``BootstrapServer`` that answers them with ready-made bytes first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from .._names import BOOT_HEADER
from ..core.history import History, listeners
from ..core.registry import Registry
from ..store import StoreLimits
from ..store.url import open_store
from ..wire.routes import METRICS_PATH, NAMESPACES_PATH, OPENAPI_PATH, READY_PATH, path
from .access import GUARD, Guard, classify
from .appkeys import CONFIG, HISTORY, KIND_TABLE, PROBE_CHANGES, REGISTRY, WATCH_FIGURES, WatchFigures
from .auth import UnroutedExpect, auth_middleware, expect_handler
from .body import BODY_BUDGET, BodyBudget
from .bringup_page import PAGE_SCRIPTS, page_scripts
from .change_words import CHANGE_WORDS, ChangeWords
from .collectors import BringUpCollector, LeaseCollector, WatchCollector, kind_figures, waits_by_namespace
from .config import ServerConfig
from .errors import STORE_REFUSALS, store_refusals
from .face import ExpectHandler, Face
from .face_registry import installed_faces, select
from .fastpath.batches import BATCH_REPLIES, BatchReplies
from .fastpath.eligible import ELIGIBILITY, Eligibility
from .fastpath.gets import GET_REPLIES, GetReplies
from .fastpath.watches import WATCH_REPLIES, WatchReplies
from .front import front_middleware
from .kind_spec import KindTable
from .metrics import METRICS, NAMESPACE_FIGURES, Metrics, NamespaceFigures, metrics
from .openapi import openapi
from .server_routes import list_namespaces, ready

if TYPE_CHECKING:
    from .connections import ConnectionTable

__all__ = ["CONFIG", "GET_REPLIES", "REGISTRY", "create_app", "release_waiters"]

log = logging.getLogger("aiobootstrap")


def create_app(config: ServerConfig | None = None, *, faces: Sequence[Face] | None = None) -> web.Application:
    """The aiobootstrap app for ``config`` (defaults when omitted), serving ``faces`` (the installed ones,
    ``face_registry``, unless told; those ``config.faces`` names of them) beside its own routes."""
    config = config if config is not None else ServerConfig()
    faces = select(installed_faces() if faces is None else faces, config.faces)
    tokens = config.tokens
    guard = None if tokens is None else Guard(tokens, open_reads=config.auth_reads == "open")
    # The slash redirect, then the metrics' timing around the error replies: one middleware (front.py).
    middlewares: list[Middleware] = [front_middleware(_slash_redirect)]
    if guard is not None:
        # Inside the front middleware (so its refusals are timed JSON), before any handler: a refused request
        # has nothing read and nothing changed.
        middlewares.append(auth_middleware(guard))
    app = web.Application(middlewares=middlewares, client_max_size=config.max_body_size)
    app[CONFIG] = config
    app[STORE_REFUSALS] = store_refusals()
    app[BODY_BUDGET] = BodyBudget(config.max_body_memory)
    # Every record kind the faces declare: how a get of each is encoded, whether it is listed.
    app[KIND_TABLE] = KindTable(spec for face in faces for spec in face.kinds)
    app[CHANGE_WORDS] = ChangeWords(app[KIND_TABLE])  # how /watch shows each kind's changes
    counts = [count for face in faces for count in face.counts]
    app[METRICS] = Metrics(lambda: _live_namespaces(app), keep=config.max_namespaces, counts=counts)
    app[WATCH_FIGURES] = WatchFigures()
    app[NAMESPACE_FIGURES] = lambda: _namespace_figures(app, faces)
    # The page: the host's frame and the sections of the faces that show something (their scripts).
    app[PAGE_SCRIPTS] = page_scripts(faces)
    app.on_response_prepare.append(_boot_header)
    app[ELIGIBILITY] = Eligibility(_boot_header, middlewares)
    app.cleanup_ctx.append(_registry_context)
    app.cleanup_ctx.extend(context for face in faces for context in face.contexts)
    app.cleanup_ctx.append(_fast_path_context)
    app.on_shutdown.append(release_waiters)
    # aiohttp answers Expect before any middleware: this one checks the token and size first.
    expect = expect_handler(config, guard)
    routes = _routes(expect, faces)
    app.router.add_routes(routes)
    app.router.add_routes(_namespaced(routes))
    # Server-wide routes: one server, one set of metrics, one API description.
    app.router.add_get(READY_PATH, ready, expect_handler=expect)
    app.router.add_get(METRICS_PATH, metrics, expect_handler=expect)
    app.router.add_get(NAMESPACES_PATH, list_namespaces, expect_handler=expect)
    app.router.add_get(
        OPENAPI_PATH,
        openapi(faces, token=guard is not None, open_reads=config.auth_reads == "open"),
        expect_handler=expect,
    )
    # Last: a request with Expect that no route above matched gets the same answers.
    app.router.register_resource(UnroutedExpect(app.router, guard))
    # Every route is a probe, a read or a write, as its face (or access.py, for the server's own) declares, or
    # the app is not made.
    classified = classify(app.router, faces)
    if guard is not None:
        guard.routes = classified
        app[GUARD] = guard
    return app


_FIGURES_A_TURN = 16
"""Namespaces a scrape reads between two turns of the loop (a local store's reads do not yield)."""

_normalize_path = web.normalize_path_middleware(
    append_slash=False, remove_slash=True, merge_slashes=False, redirect_class=web.HTTPTemporaryRedirect
)


@web.middleware
async def _slash_redirect(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A route asked with a trailing ``/`` answers ``307`` to the route without it, query kept (FastAPI's
    ``redirect_slashes``, which the engines' servers have): a client that follows redirects keeps working.

    The redirect of a request whose body is still unread says ``Connection: close``: the server does
    not linger to drop the body (``lingering_time=0``), and a client that kept the connection for its
    next request would find it closed under it."""
    if request.match_info.http_exception is None:
        return await handler(request)  # a route matched: nothing to redirect, no layer more to run
    try:
        return await _normalize_path(request, handler)
    except web.HTTPRedirection as redirect:
        location = {"Location": redirect.headers["Location"]}
        reply = web.Response(status=redirect.status, headers=location, text=redirect.text)
        if request.body_exists and not request.content.is_eof():
            reply.force_close()
        return reply


def _routes(expect: ExpectHandler | None = None, faces: Sequence[Face] | None = None) -> list[web.RouteDef]:
    """The routes of ``faces`` (the installed ones unless told): each is also served under ``/ns/{namespace}``."""
    faces = installed_faces() if faces is None else faces
    return [route for face in faces for route in face.routes(expect)]


def _namespaced(routes: Iterable[web.RouteDef]) -> list[web.RouteDef]:
    return [
        web.RouteDef(route.method, path(route.path, "{namespace}"), route.handler, route.kwargs)
        for route in routes
    ]


# -- start and stop -------------------------------------------------------


async def _registry_context(app: web.Application) -> AsyncIterator[None]:
    config = app[CONFIG]
    limits = StoreLimits(
        # A world size already bounds the ranks; the cap guards servers without one.
        max_ranks=config.max_ranks if config.world_size is None else None,
        max_namespaces=config.max_namespaces,
        max_roles=config.max_roles,
        max_leases=config.max_leases,
        kind_caps={
            spec.name: cap
            for spec in app[KIND_TABLE].values()
            if spec.cap is not None and (cap := spec.cap(config)) is not None
        },
    )
    store = open_store(
        config.store_url, prefix=config.store_prefix, limits=limits, min_replicas=config.store_min_replicas
    )
    kinds = app[KIND_TABLE]
    replies = GetReplies(
        kinds.encode, lambda: store.incarnation, encode_object=kinds.encode_object, eligible=app[ELIGIBILITY]
    )
    registry = Registry(store, max_waiters=config.max_waiters)
    words = app[CHANGE_WORDS]
    history = History(
        store,
        limit=config.watch_history,
        memory=config.watch_history_memory,
        parking=registry.parking,
        shown=words.shown if words.hides else None,  # a change no watcher is shown is not kept
        sets=[name for name, spec in app[KIND_TABLE].items() if spec.members],
    )
    in_order = store.follow_in_order(history)  # Redis: the stream's order, not its own writes first
    await store.open(registry if in_order else listeners(registry, history))
    await history.open()
    app[METRICS].registry.register(LeaseCollector(registry))
    app[METRICS].registry.register(BringUpCollector(app[METRICS]))
    app[REGISTRY] = registry
    app[HISTORY] = history
    app[METRICS].registry.register(WatchCollector(history, app[WATCH_FIGURES]))
    app[GET_REPLIES] = replies
    app[BATCH_REPLIES] = batches = BatchReplies()
    log.info("store: %s", store.description)
    try:
        yield
    finally:
        # The registry was closed by release_waiters (on_shutdown runs before any cleanup).
        await app[METRICS].close()
        batches.close()
        await store.close()


async def _fast_path_context(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx``, last: the fast path's subscriptions to the core, every one of them, made here once.

    Run after the registry, the history and the prober are made, when every
    hook and middleware an embedder adds is in place: whether the app's
    replies may be pre-built (``fastpath/eligible.py``) is decided now. Each
    subscription is dropped as the app stops.
    """
    app[ELIGIBILITY].decide(app)
    registry, history, gets = app[REGISTRY], app[HISTORY], app[GET_REPLIES]
    probes = app.get(PROBE_CHANGES)  # set by the encoder face's prober, when it probes
    watches = app[WATCH_REPLIES] = WatchReplies(
        history, registry.parking, gets.stamp, app[ELIGIBILITY], probe_changes=probes, words=app[CHANGE_WORDS]
    )
    subscriptions = [
        registry.deliveries.subscribe(gets),  # a woken get's reply, written at its delivery
        history.changed_namespaces.subscribe(watches),  # parked watches answered by group
        registry.parking.wait_changes.steps.subscribe(watches),  # the page's &waits=
    ]
    if probes is not None:
        subscriptions.append(probes.steps.subscribe(watches))  # the page's &findings=
    try:
        yield
    finally:
        for unsubscribe in subscriptions:
            unsubscribe()


async def release_waiters(
    app: web.Application, connections: ConnectionTable | None = None, grace: float = 0.0
) -> None:
    """Let every parked wait go, and refuse new waits and changes: the one way a stop does it.

    With ``connections`` (a ``BootstrapServer`` stopping), the parked waits
    of its connections are answered first with ready-made ``503`` bytes, one
    write each, their connections closed and their handlers cancelled; then
    those connections are given up to ``grace`` seconds to go. Every other
    wait (in-process, or on a test server's connections) gets
    :class:`~aiobootstrap.exceptions.ShuttingDown` from the registry. Once
    done, running it again does nothing.
    """
    registry = app[REGISTRY]
    if registry.closed:
        return
    answered = 0
    if connections is not None:
        answered = connections.answer(registry.parked_tasks, app[GET_REPLIES].shutting_down())
    registry.close()
    app[HISTORY].close()  # its watchers answer 503, its streams end
    if connections is not None and answered:
        log.info("answered %d parked waits with 503", answered)
        # Their connections out of aiohttp's table first: its shutdown then walks only the rest.
        await connections.answered_closed(grace)


async def _boot_header(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: every reply, errors included, names the store's incarnation."""
    registry = request.app.get(REGISTRY)
    if registry is not None:
        response.headers[BOOT_HEADER] = registry.incarnation


async def _live_namespaces(app: web.Application) -> set[str]:
    registry = app[REGISTRY]
    return set(await registry.namespaces()) | set(registry.parked_namespaces())


async def _namespace_figures(app: web.Application, faces: Sequence[Face]) -> list[NamespaceFigures]:
    """Each live namespace as ``faces`` count it (``Face.counts``, ``Face.figures``), for a scrape or a listing."""
    registry = app[REGISTRY]
    names = sorted(await _live_namespaces(app))
    waits = waits_by_namespace(registry.oldest_waits())
    config = app[CONFIG]
    counts = [count for face in faces for count in face.counts]
    figures = []
    for number, name in enumerate(names, 1):
        figures.append(
            NamespaceFigures(
                name,
                registry.parked_in(name),
                await registry.version(name),
                {count.name: await count.read(registry, name) for count in counts},
                await kind_figures(registry, name, faces, config, waits.get(name, {})),
            )
        )
        if number % _FIGURES_A_TURN == 0:
            # A local store answers without yielding: let the loop turn between slices, so that a
            # scrape of thousands of namespaces never holds up the requests beside it.
            await asyncio.sleep(0)
    return figures
