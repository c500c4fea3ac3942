"""What every handler reads from a request (namespace, parameters), and the
not-registered reply: what the faces share, so that no face imports another."""

from __future__ import annotations

from aiohttp import web

from ..._names import DEFAULT_NAMESPACE
from ..._ranks import RankSet
from ...exceptions import BadRequest
from ...wire.errors import encode_not_registered
from ...wire.kinds import KindRoutes
from ...wire.params import parse_after, parse_wait
from ...wire.routes import check_namespace
from ..appkeys import CONFIG, REGISTRY
from ..fastpath.replies import JsonReply

__all__ = [
    "after_of",
    "namespace_of",
    "not_registered",
    "param",
    "wait_seconds",
]


def namespace_of(request: web.Request) -> str:
    """The namespace a request addresses: its ``/ns/{namespace}`` prefix, or the default."""
    name = request.match_info.get("namespace")
    return DEFAULT_NAMESPACE if name is None else check_namespace(name)


def param(request: web.Request, name: str) -> str | None:
    """The query parameter ``name``, or ``None``; ``BadRequest`` when it is given twice."""
    values = request.query.getall(name, [])
    if len(values) > 1:
        raise BadRequest(f"The {name} parameter is given more than once.")
    return values[0] if values else None


def after_of(request: web.Request) -> int:
    """The ``after`` parameter; ``0`` when ``boot`` names another incarnation than the store's.

    A version from an earlier incarnation of the registry (an in-memory
    server restarted) means nothing here: its new records are news to the
    caller, however their versions compare (SPEC section 10, last bullet).
    """
    after = parse_after(param(request, "after"))
    boot = param(request, "boot")
    if boot is not None and boot != request.app[REGISTRY].incarnation:
        return 0
    return after


def wait_seconds(request: web.Request) -> float:
    """The ``wait`` parameter, bounded by the server's ``max_wait``."""
    return min(parse_wait(param(request, "wait")), request.app[CONFIG].max_wait)


def not_registered(kind: KindRoutes, missing: list[int] | RankSet) -> JsonReply:
    """The ``404`` of ranks not registered, with ``missing``: it tells a client a rank's 404 from a wrong URL's."""
    # Not raised, for that field. A batch's (a RankSet) lists a bounded head of its ranks, and all as ranges.
    return JsonReply(encode_not_registered(missing, kind.noun), status=404)
