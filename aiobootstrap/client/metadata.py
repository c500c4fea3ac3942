"""The client's calls of Mooncake's metadata protocol (``server/faces/mooncake``): get, wait for, put and
delete a key's value, kept and given back byte for byte, and list the namespace's engines.

Each is a function of the transport that :class:`BootstrapClient` makes one of
its methods. A key with no value is Mooncake's own text ``404``
(``metadata not found``), read as :class:`NotRegistered`.
"""

from __future__ import annotations

import json
from typing import Any

from ..exceptions import NotRegistered
from ..wire.metadata import LEASE_HEADER, METADATA_PATH, MOONCAKE_LISTING_PATH, NOT_FOUND
from . import calls
from .leases import ClientLease, send_registration
from .restarts import Replay
from .retry import Deadline
from .transport import Reply, Transport

__all__ = ["delete_metadata", "get_metadata", "mooncake_engines", "put_metadata", "wait_metadata"]

_NOT_FOUND = NOT_FOUND.encode()


async def get_metadata(transport: Transport, key: str, *, timeout: float | None = 60.0) -> bytes:
    """The value stored under ``key`` now; :class:`NotRegistered` when there is none."""
    reply = await transport.call(
        "GET", METADATA_PATH, Deadline(timeout), params={"key": key}, read_timeout=calls.READ_TIMEOUT
    )
    return _value(transport, reply)


async def wait_metadata(
    transport: Transport, key: str, *, after: int = 0, timeout: float | None = 60.0
) -> tuple[bytes, int]:
    """``key``'s value and version once it exists (and changed after version ``after``), waiting up to
    ``timeout`` seconds; :class:`NotRegistered` when the time runs out first."""

    def answered(path: str, reply: Reply) -> bool:
        if reply.status == 200 or (reply.status == 404 and reply.body == _NOT_FOUND):
            return reply.status == 200
        raise transport.error(reply.status, path, reply.body)

    reply = await transport.long_poll(
        METADATA_PATH,
        lambda wait: {"key": key, "after": str(after), "wait": f"{wait:g}"},
        Deadline(timeout),
        answered,
    )
    return _value(transport, reply), int(reply.version or 0)


async def put_metadata(
    transport: Transport,
    key: str,
    value: bytes,
    *,
    timeout: float | None = 60.0,
    lease: ClientLease | None = None,
) -> None:
    """Store ``value`` under ``key``; an engine's RPC entry (a key holding ``rpc_meta``) that holds
    another value raises :class:`BadRequest` (Mooncake's ``Duplicate rpc_meta key not allowed``).

    ``lease`` (from ``client.lease``) puts the value on it (``X-Aiobootstrap-Lease``): the key is deleted
    when the lease ends, and stored again if the lease is found gone and granted again. Retried like
    ``register``, and sent again after a restart with ``reregister=True``.
    """
    if not isinstance(value, bytes | bytearray | memoryview):
        # aiohttp would send a dict form-encoded (``a=1``) and Mooncake's engines would read that back.
        raise TypeError(
            f"A metadata value is bytes (the JSON text Mooncake stores, such as json.dumps(value).encode()), "
            f"not {type(value).__name__}."
        )
    replay = Replay("PUT", METADATA_PATH, bytes(value), params={"key": key}, lease_header=LEASE_HEADER)
    await send_registration(transport, (METADATA_PATH, key), replay, timeout, lease)


async def delete_metadata(transport: Transport, key: str, *, timeout: float | None = 60.0) -> bool:
    """Delete ``key``; ``False`` when there was nothing under it. Not stored again after a restart or a
    lease's re-grant."""
    transport.forget_registration((METADATA_PATH, key))
    reply = await transport.call(
        "DELETE", METADATA_PATH, Deadline(timeout), params={"key": key}, read_timeout=calls.READ_TIMEOUT
    )
    if reply.status == 404 and reply.body == _NOT_FOUND:
        return False
    if reply.status != 200:
        raise transport.error(reply.status, METADATA_PATH, reply.body)
    return True


async def mooncake_engines(transport: Transport, *, timeout: float | None = 60.0) -> dict[str, Any]:
    """The namespace's Mooncake engines as ``GET /mooncake`` lists them: ``keys``, ``probing``,
    ``engines`` (each ``name``, ``rpc``, ``segment``, ``buffers``, ``protocol``...) and ``engine_count``."""
    reply = await calls.request(transport, "GET", MOONCAKE_LISTING_PATH, Deadline(timeout))
    listing: dict[str, Any] = json.loads(reply.body)
    return listing


def _value(transport: Transport, reply: Reply) -> bytes:
    """A get's value, or :class:`NotRegistered` for Mooncake's ``404``; any other reply is its error."""
    if reply.status == 404 and reply.body == _NOT_FOUND:
        raise NotRegistered(NOT_FOUND)
    if reply.status != 200:
        raise transport.error(reply.status, METADATA_PATH, reply.body)
    return reply.body
