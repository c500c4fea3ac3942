"""The routes and the limits both ends size their requests by.

The default namespace's routes are unprefixed; every other namespace's sit
under ``/ns/{name}``. Nothing here does I/O.
"""

from __future__ import annotations

from .._names import DEFAULT_NAMESPACE, check_name
from ..exceptions import BadRequest

HEALTH_PATH = "/health"
READY_PATH = "/ready"
REGISTER_PATH = "/register_transfer_engine_info"
GET_PATH = "/get_transfer_engine_info"
BATCH_PATH = "/get_transfer_engine_info_batch"
CONFIG_REGISTER_PATH = "/register_parallelism_config"
CONFIG_GET_PATH = "/get_parallelism_config"
CONFIG_BATCH_PATH = "/get_parallelism_config_batch"
ENCODER_REGISTER_PATH = "/register_encoder_url"
ENCODER_UNREGISTER_PATH = "/unregister_encoder_url"
ENCODER_LIST_PATH = "/list_encoder_urls"
ENCODER_HEALTH_PATH = "/encoder_url_health"
PREFILL_ROUTE_PATH = "/route"
"""SGLang's prefill bootstrap (PD disaggregation): a prefill rank's ``PUT``, decode's ``GET``."""
PREFILL_REGISTER_ROOM_PATH = "/register_dp_rank"
PREFILL_QUERY_ROOMS_PATH = "/query_dp_ranks"
PREFILL_LISTING_PATH = "/prefill"
"""aiobootstrap's own: the prefill deployment's topology, ranks and missing ranks (the page, ``status``)."""
"""The encoder URLs with what their probes found: a route of its own, so ``/list_encoder_urls`` stays the
engines' reply exactly (SPEC section 7)."""
RANKS_PATH = "/ranks"
METRICS_PATH = "/metrics"
OPENAPI_PATH = "/openapi.json"
NAMESPACES_PATH = "/namespaces"
PAGE_PATH = "/"
"""The bring-up page (SPEC section 11); in a namespace ``/ns/{namespace}/``."""

SERVER_WIDE_PATHS = frozenset({READY_PATH, METRICS_PATH, OPENAPI_PATH, NAMESPACES_PATH})
"""Routes served once for the whole server, never under ``/ns/{name}``."""

JSON_TYPE = "application/json"

DEFAULT_MAX_BODY_SIZE = 64 * 1024 * 1024
"""The server's default limit on a request body (``--max-body-size``), and so on one record: the
client's default bound on a reply, per rank asked (``max_reply_size``)."""

BATCH_QUERY_CHARS = 4000
"""The longest rank spec a client puts in one batch query: well inside an 8 KiB request line."""

MAX_BATCH_RANKS = 1 << 16
"""The most ranks one batch request may name (65,536): past it a ``400``; the client splits larger sets.

A set is kept as ranges, so naming many ranks is cheap to parse; the cap bounds
what one request may make the server look at and report.
"""

MISSING_LIST_MAX = 1024
"""The most ranks a batch ``404`` or a listing names in ``missing``; ``missing_ranks`` holds them all, as ranges."""

NAMESPACE_PREFIX = "/ns/"


def check_namespace(name: str) -> str:
    """``name`` if it may name a namespace (the one name rule); else a ``BadRequest`` saying the rule."""
    try:
        return check_name(name, "namespace")
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def path(route: str, namespace: str = DEFAULT_NAMESPACE) -> str:
    """The path of ``route`` in ``namespace``; the default namespace's routes, and the server-wide
    ones (:data:`SERVER_WIDE_PATHS`), are unprefixed.

    The server builds its route templates with ``path(route, "{namespace}")``.
    """
    if namespace == DEFAULT_NAMESPACE or route in SERVER_WIDE_PATHS:
        return route
    return f"{NAMESPACE_PREFIX}{namespace}{route}"
