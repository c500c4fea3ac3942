"""The client's calls of the encoder face (``server/faces/encoders``): the encoder URL list, added to, removed
from, read, waited on, and what the server's probes found of each URL.

Each is a function of the transport that :class:`BootstrapClient` makes one of
its methods. The list's wait ends at a new version rather than at a ``200``:
the server answers ``200`` unchanged at its own deadline.
"""

from __future__ import annotations

from functools import partial

from ..wire.bodies import url_body
from ..wire.encoder_health import EncoderHealthReport, decode_encoder_health
from ..wire.params import encoder_list_query
from ..wire.results import EncoderUrls, decode_encoder_urls
from ..wire.routes import (
    ENCODER_HEALTH_PATH,
    ENCODER_LIST_PATH,
    ENCODER_REGISTER_PATH,
    ENCODER_UNREGISTER_PATH,
)
from . import calls
from .leases import ClientLease, send_registration
from .restarts import Replay
from .retry import Deadline
from .transport import Reply, Transport

__all__ = [
    "encoder_url_health",
    "list_encoder_urls",
    "register_encoder_url",
    "unregister_encoder_url",
    "wait_encoder_urls",
]


async def register_encoder_url(
    transport: Transport, url: str, *, timeout: float | None = 60.0, lease: ClientLease | None = None
) -> None:
    """Add ``url`` to the encoder URL list (a URL already listed stays listed once).

    Retries an unreachable server like :meth:`register`; with
    ``reregister=True`` the URL is registered again on a restarted server.
    ``lease`` puts the URL on a lease: it leaves the list when the lease ends.
    """
    replay = Replay("POST", ENCODER_REGISTER_PATH, url_body(url))
    await send_registration(transport, (ENCODER_REGISTER_PATH, url), replay, timeout, lease)


async def unregister_encoder_url(transport: Transport, url: str, *, timeout: float | None = 60.0) -> None:
    """Remove ``url`` from the encoder URL list; nothing to do when it is not listed."""
    transport.forget_registration((ENCODER_REGISTER_PATH, url))
    await calls.request(transport, "DELETE", ENCODER_UNREGISTER_PATH, Deadline(timeout), body=url_body(url))


async def list_encoder_urls(transport: Transport, *, timeout: float | None = 60.0) -> list[str]:
    """The encoder URLs, in order of first registration (retrying an unreachable server up to ``timeout``)."""
    query = encoder_list_query(0, 0.0)
    reply = await calls.request(transport, "GET", ENCODER_LIST_PATH, Deadline(timeout), params=query)
    return decode_encoder_urls(reply.body).urls


async def encoder_url_health(transport: Transport, *, timeout: float | None = 60.0) -> EncoderHealthReport:
    """What the server's probes found of each encoder URL, listed then evicted (``GET
    /encoder_url_health``; retrying an unreachable server up to ``timeout``). Failure counts and
    eviction clocks are each replica's own: given several, the one that answers says."""
    reply = await calls.request(transport, "GET", ENCODER_HEALTH_PATH, Deadline(timeout))
    return decode_encoder_health(reply.body)


async def wait_encoder_urls(
    transport: Transport, after: int = 0, *, timeout: float | None = None
) -> EncoderUrls:
    """The encoder URL list once its version is past ``after``, waiting up to ``timeout`` seconds.

    When the time runs out first, the list as it is (its ``version``
    equal to ``after``): an unchanged list is an answer, not an error.
    Pass the ``version`` of one answer as the ``after`` of the next to
    follow every change; ``timeout=0`` reads the list and its version at
    once. A version below ``after`` (a restarted in-memory server begins
    its versions again) is a change too.
    """
    newest: list[EncoderUrls] = []

    def changed(path: str, reply: Reply) -> bool:
        if reply.status != 200:
            raise transport.error(reply.status, path, reply.body)
        newest[:] = [decode_encoder_urls(reply.body)]
        # Below after: the server lost the list (an in-memory one restarted, its
        # versions begun again), and what it holds now is news to the caller.
        return newest[0].version != after

    await transport.long_poll(
        ENCODER_LIST_PATH, partial(encoder_list_query, after), Deadline(timeout), changed
    )
    return newest[0]
