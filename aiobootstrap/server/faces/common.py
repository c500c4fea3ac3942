"""What every handler reads from a request (namespace, parameters, a register body's lease), and the plain
replies it sends: what the faces share, so that no face imports another."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from ... import wire
from ..._names import DEFAULT_NAMESPACE, VERSION_HEADER
from ..._ranks import RankSet
from ...exceptions import BadRequest
from ...wire.leases import parse_lease_field
from ..appkeys import CONFIG, REGISTRY
from ..fastpath.gets import SEPARATE_BODY_OVER
from ..fastpath.writes import Body, write_stream
from .kinds import RecordKind

__all__ = [
    "after_of",
    "json_reply",
    "lease_of_body",
    "namespace_of",
    "not_registered",
    "param",
    "wait_seconds",
]


def namespace_of(request: web.Request) -> str:
    """The namespace a request addresses: its ``/ns/{namespace}`` prefix, or the default."""
    name = request.match_info.get("namespace")
    return DEFAULT_NAMESPACE if name is None else wire.check_namespace(name)


def param(request: web.Request, name: str) -> str | None:
    """The query parameter ``name``, or ``None``; ``BadRequest`` when it is given twice."""
    values = request.query.getall(name, [])
    if len(values) > 1:
        raise BadRequest(f"The {name} parameter is given more than once.")
    return values[0] if values else None


def lease_of_body(payload: Mapping[str, Any]) -> str | None:
    """The ``lease`` a register body names (SPEC section 9), or ``None``: every face's registers read it so."""
    return parse_lease_field(payload)


def after_of(request: web.Request) -> int:
    """The ``after`` parameter; ``0`` when ``boot`` names another incarnation than the store's.

    A version from an earlier incarnation of the registry (an in-memory
    server restarted) means nothing here: its new records are news to the
    caller, however their versions compare (SPEC section 10, last bullet).
    """
    after = wire.parse_after(param(request, "after"))
    boot = param(request, "boot")
    if boot is not None and boot != request.app[REGISTRY].incarnation:
        return 0
    return after


def wait_seconds(request: web.Request) -> float:
    """The ``wait`` parameter, bounded by the server's ``max_wait``."""
    return min(wire.parse_wait(param(request, "wait")), request.app[CONFIG].max_wait)


async def json_reply(request: web.Request, body: Body, version: int | None = None) -> web.StreamResponse:
    """A 200 JSON reply of ``body``, which may be shared by many replies at once.

    ``body`` is one ``bytes`` or the parts of one (a batch's, whose large items
    are the records' own bodies): they are written one after the other, never
    joined per reply when large. ``version``, when given, goes in the
    ``X-Aiobootstrap-Version`` header.
    """
    headers = {} if version is None else {VERSION_HEADER: str(version)}
    length = len(body) if isinstance(body, bytes) else sum(map(len, body))
    if length <= SEPARATE_BODY_OVER:
        whole = body if isinstance(body, bytes) else b"".join(body)
        return web.Response(body=whole, content_type=wire.JSON_TYPE, headers=headers)
    # web.Response joins headers and body into one new bytes object (on Python
    # before 3.12.9): a private copy of a 20 MB reply per getter in flight.
    # Written apart, every getter sends the registration's one bytes object.
    response = web.StreamResponse(headers={"Content-Type": wire.JSON_TYPE, **headers})
    response.content_length = length
    await response.prepare(request)
    await write_stream(request, response, body)
    await response.write_eof()
    return response


def not_registered(kind: RecordKind, missing: list[int] | RankSet) -> web.Response:
    """The ``404`` of ranks not registered, with ``missing``: it tells a client a rank's 404 from a wrong URL's."""
    # Not raised, for that field. A batch's (a RankSet) lists a bounded head of its ranks, and all as ranges.
    return web.Response(
        status=404, body=wire.encode_not_registered(missing, kind.noun), content_type=wire.JSON_TYPE
    )
