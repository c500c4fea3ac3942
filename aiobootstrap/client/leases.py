"""A lease held by a client (SPEC section 9): granted, kept alive in the background, revoked on exit.

Theory of operation
-------------------
``async with client.lease(ttl=10.0) as lease:`` grants a lease (``POST
/leases``), then one task sends a keepalive every third of the TTL through
the transport, so with its retries and its failover across replicas: a
keepalive that finds no replica keeps trying until the next one is due.
Leaving the block stops the task and revokes the lease (``DELETE``), which
deletes every record on it at once; a revocation the server cannot be
reached for is logged, not raised: the lease expires by itself.

A register method given ``lease=`` sends its body with ``"lease": ID`` and
the lease remembers it. A lease found gone (a keepalive or a register
answered with the lease ``404``: it expired through a long partition, or
the server lost its data) is granted again, and every record it held is
registered again on the new one, with one WARNING. An unregister forgets
the record (the transport tells every lease, :meth:`ClientLease.forget`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Hashable, Mapping
from types import TracebackType

from ..exceptions import BootstrapError, LeaseNotFound, ServerUnavailable, TooManyLeases
from ..wire import errors as wire_errors
from ..wire import leases as wire_leases
from .restarts import Replay
from .retry import Deadline
from .transport import Transport

__all__ = ["ClientLease", "send_registration"]

log = logging.getLogger("aiobootstrap.client")

_READ_TIMEOUT = 60.0


class ClientLease:
    """A lease this client holds. Use it as ``async with client.lease(ttl=...) as lease:``.

    ``id`` is the server's lease id (a new one after a re-grant), ``ttl`` its
    seconds. Pass the lease as ``lease=`` to any register method.
    """

    def __init__(self, transport: Transport, ttl: float, *, timeout: float | None = 60.0) -> None:
        self._transport = transport
        self.ttl = float(ttl)
        self._timeout = timeout
        self._id: str | None = None
        self._records: dict[Hashable, Replay] = {}
        """Every registration made on the lease, as sent without the lease: sent again after a re-grant."""
        self._task: asyncio.Task[None] | None = None
        self._regrant_lock = asyncio.Lock()
        self.regrants = 0
        """How many times the lease was found gone and granted again."""

    @property
    def id(self) -> str:
        if self._id is None:
            raise BootstrapError("The lease is not granted yet: use it in `async with client.lease(...)`.")
        return self._id

    @property
    def held(self) -> bool:
        """Whether the lease is granted and not revoked."""
        return self._id is not None

    async def __aenter__(self) -> ClientLease:
        await self.grant()
        self._transport.unregistered.append(self.forget)
        self._task = asyncio.get_running_loop().create_task(self._keep_alive())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.revoke()

    # -- the calls -------------------------------------------------------

    async def grant(self) -> None:
        """Ask the server for a lease of :attr:`ttl` seconds (retrying an unreachable server up to the timeout)."""
        reply = await self._call(
            "POST", wire_leases.LEASES_PATH, Deadline(self._timeout), wire_leases.lease_body(self.ttl)
        )
        self._id = wire_leases.decode_lease(reply).lease

    async def keepalive(self) -> None:
        """Renew the lease now; granted again (its records registered again) when it was found gone."""
        lease = self.id
        try:
            await self._call("POST", wire_leases.lease_keepalive_path(lease), Deadline(self.ttl / 3))
        except LeaseNotFound:
            await self._regrant(lease)

    async def read(self) -> wire_leases.LeaseInfo:
        """The lease as the server has it: its TTL, the seconds left and the records on it."""
        lease = self.id
        body = await self._call("GET", wire_leases.lease_path(lease), Deadline(self._timeout))
        return wire_leases.decode_lease(body)

    async def revoke(self) -> None:
        """Stop keeping the lease alive and revoke it: the server deletes every record on it now."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        lease, self._id = self._id, None
        self._records.clear()
        with contextlib.suppress(ValueError):
            self._transport.unregistered.remove(self.forget)
        if lease is None:
            return
        try:
            await self._call("DELETE", wire_leases.lease_path(lease), Deadline(self.ttl))
        except LeaseNotFound:
            pass  # gone already: what was asked for
        except ServerUnavailable as exc:
            log.warning("could not revoke lease %s (%s); it expires in %g s by itself", lease, exc, self.ttl)

    def forget(self, key: Hashable) -> None:
        """The record named ``key`` was unregistered: do not register it again after a re-grant."""
        self._records.pop(key, None)

    async def register(self, key: Hashable, replay: Replay, timeout: float | None) -> None:
        """Send a registration on this lease, remembered for a re-grant.

        Not remembered by the transport's ``reregister`` replay: after a restart
        that lost the lease, a replay naming it could only fail; the lease's
        re-grant registers its records again instead. A registration of the
        same record made without the lease is forgotten there, so no restart
        brings the record back on no lease.
        """
        lease = self.id
        self._transport.forget_registration(key)
        self._records[key] = replay
        try:
            await self._send(key, replay, lease, timeout)
        except LeaseNotFound:
            # Re-granting registers every record of the lease again, this one included.
            await self._regrant(lease)

    # -- inside ----------------------------------------------------------

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            while True:
                try:
                    await self.keepalive()
                    break
                except ServerUnavailable as exc:
                    # Each try lasts a third of the TTL, backing off inside: try again at once,
                    # so a server back before the deadline hears from us in time.
                    log.info("lease %s: keepalive found no server (%s); trying again", self._id, exc)
                except BootstrapError as exc:
                    log.warning("lease %s: keepalive failed: %s", self._id, exc)
                    break

    async def _regrant(self, lost: str) -> None:
        async with self._regrant_lock:
            if self._id != lost:
                return  # another call granted it again meanwhile
            await self.grant()
            self.regrants += 1
            log.warning(
                "lease %s was gone (expired or lost by the server); granted lease %s and registered its "
                "%d record(s) again",
                lost,
                self._id,
                len(self._records),
            )
            lease = self.id
            for key, replay in list(self._records.items()):
                await self._send(key, replay, lease, self._timeout)

    async def _send(self, key: Hashable, replay: Replay, lease: str, timeout: float | None) -> None:
        if replay.lease_header is None:
            body, headers = wire_leases.with_lease(replay.body, lease), None
        else:  # the body is the value itself (Mooncake's): the lease goes beside it
            body, headers = replay.body, {replay.lease_header: lease}
        await self._call(replay.method, replay.path, Deadline(timeout), body, replay.params, headers)

    async def _call(
        self,
        method: str,
        path: str,
        deadline: Deadline,
        body: bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        reply = await self._transport.call(
            method, path, deadline, params=params, body=body, headers=headers, read_timeout=_READ_TIMEOUT
        )
        if reply.status == 409 and path == wire_leases.LEASES_PATH:
            raise TooManyLeases(wire_errors.error_detail(reply.status, reply.body))
        if reply.status != 200:
            raise self._transport.error(reply.status, path, reply.body)
        return reply.body


async def send_registration(
    transport: Transport, key: Hashable, replay: Replay, timeout: float | None, lease: ClientLease | None
) -> None:
    """Send a registration, on ``lease`` when one is given."""
    if lease is None:
        await transport.send_registration(key, replay, timeout)
    else:
        await lease.register(key, replay, timeout)
