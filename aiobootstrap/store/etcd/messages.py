"""etcd's transactions in aetcd's protobuf messages: the one module that builds and reads them.

aetcd's own ``transaction`` drops the reply's header (the revision a write
took, which the store waits for on its feed) and cannot send a failure
branch of nothing; the store sends ``TxnRequest``s of aetcd's generated
messages (``aetcd.rpc``) through the client's ``kvstub`` instead. A
transaction here is a list of comparisons, the operations to run when they
all hold, and the reads to run when one does not. Only this module and
``connection`` import aetcd.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

try:  # the `etcd` extra
    from aetcd import rpc
except ImportError:  # pragma: no cover
    rpc = None

__all__ = [
    "MAX_OPS",
    "MAX_REQUEST_BYTES",
    "Found",
    "Txn",
    "absent",
    "delete",
    "delete_prefix",
    "exists",
    "get",
    "get_prefix",
    "grant",
    "keepalive",
    "mod_is",
    "prefix_end",
    "put",
    "read",
    "request_bytes",
    "revoke",
    "run",
    "time_to_live",
    "txn",
]

MAX_OPS = 128
"""The operations etcd takes in one transaction (``--max-txn-ops``, 128 by default)."""

MAX_REQUEST_BYTES = 1_572_864
"""The bytes etcd takes in one request (``--max-request-bytes``, 1.5 MiB by default): a larger
transaction is refused whole, before it is applied (``etcdserver: request is too large``, or gRPC's
``received message larger than max`` past that and 512 KiB)."""

Op = Any
"""An ``aetcd.rpc.RequestOp``."""
Compare = Any
"""An ``aetcd.rpc.Compare``."""


@dataclass(frozen=True, slots=True)
class Found:
    """One key read: its value and its last modification's revision."""

    key: bytes
    value: bytes
    mod_revision: int


@dataclass(frozen=True, slots=True)
class Txn:
    """A transaction's outcome: whether its comparisons held, each read's keys, and the revision after it."""

    succeeded: bool
    reads: list[list[Found]]
    revision: int


def prefix_end(prefix: bytes) -> bytes:
    """The end of the range of keys starting with ``prefix`` (etcd's ``GetPrefixRangeEnd``)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\x00"


def request_bytes(messages: Sequence[Any]) -> int:
    """About the bytes ``messages`` take in a ``TxnRequest`` (each its own, and its field's tag and length)."""
    return sum(message.ByteSize() + 6 for message in messages)


def get(key: bytes) -> Op:
    return rpc.RequestOp(request_range=rpc.RangeRequest(key=key))


def get_prefix(prefix: bytes, *, keys_only: bool = False) -> Op:
    request = rpc.RangeRequest(key=prefix, range_end=prefix_end(prefix), keys_only=keys_only)
    return rpc.RequestOp(request_range=request)


def put(key: bytes, value: bytes, lease: int = 0) -> Op:
    return rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value, lease=lease))


def delete(key: bytes) -> Op:
    return rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key))


def delete_prefix(prefix: bytes) -> Op:
    request = rpc.DeleteRangeRequest(key=prefix, range_end=prefix_end(prefix))
    return rpc.RequestOp(request_delete_range=request)


def mod_is(key: bytes, revision: int) -> Compare:
    """``key`` was last changed at ``revision`` (0: it does not exist)."""
    return rpc.Compare(key=key, result=rpc.Compare.EQUAL, target=rpc.Compare.MOD, mod_revision=revision)


def absent(key: bytes) -> Compare:
    return mod_is(key, 0)


def exists(key: bytes) -> Compare:
    return rpc.Compare(key=key, result=rpc.Compare.GREATER, target=rpc.Compare.CREATE, create_revision=0)


async def run(
    client: Any, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
) -> Txn:
    """Send one transaction with ``client`` (an aetcd client) and read its reply."""
    await client.connect()
    request = rpc.TxnRequest(compare=list(compare), success=list(success), failure=list(failure))
    reply = await client.kvstub.Txn(request, timeout=client._timeout, metadata=client.metadata)
    reads = [
        [Found(kv.key, kv.value, kv.mod_revision) for kv in response.response_range.kvs]
        for response in reply.responses
        if response.WhichOneof("response") == "response_range"
    ]
    return Txn(reply.succeeded, reads, reply.header.revision)


def txn(
    compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
) -> Callable[[Any], Awaitable[Txn]]:
    """:func:`run` as a call for ``Connection.call``: the transaction, to send with the client it is given."""
    return lambda client: run(client, compare, success, failure)


async def read(client: Any, ops: Sequence[Op]) -> Txn:
    """Several reads at one revision, in one round trip (a transaction with nothing to compare)."""
    return await run(client, (), ops)


# -- leases: aetcd's Lease reads its replies through calls of its own; the store needs their fields --


async def grant(client: Any, ttl: int) -> Any:
    """``LeaseGrant``: its reply's ``ID`` and ``TTL`` (etcd's, raised to its minimum)."""
    await client.connect()
    request = rpc.LeaseGrantRequest(TTL=ttl, ID=0)
    return await client.leasestub.LeaseGrant(request, timeout=client._timeout, metadata=client.metadata)


async def revoke(client: Any, lease_id: int) -> None:
    """``LeaseRevoke``; a lease already gone is no error."""
    await client.connect()
    request = rpc.LeaseRevokeRequest(ID=lease_id)
    try:
        await client.leasestub.LeaseRevoke(request, timeout=client._timeout, metadata=client.metadata)
    except rpc.AioRpcError as exc:
        if exc.code() != rpc.StatusCode.NOT_FOUND:
            raise


async def keepalive(client: Any, lease_id: int) -> int:
    """One ``LeaseKeepAlive``: the lease's TTL again, or 0 when it is gone."""
    reply = await client.refresh_lease(lease_id)
    return 0 if reply is None else int(reply.TTL)


async def time_to_live(client: Any, lease_id: int) -> tuple[int, int]:
    """``LeaseTimeToLive``: seconds remaining (-1: gone) and the granted TTL."""
    await client.connect()
    request = rpc.LeaseTimeToLiveRequest(ID=lease_id, keys=False)
    reply = await client.leasestub.LeaseTimeToLive(request, timeout=client._timeout, metadata=client.metadata)
    return int(reply.TTL), int(reply.grantedTTL)
