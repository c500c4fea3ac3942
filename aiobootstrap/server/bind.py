"""Binding the listening socket: light on imports, so a taken port fails fast.

The CLI binds with this before it imports the server (aiohttp and the rest
take a good part of a second to import), so "port already in use", the
commonest start-up failure, is reported within a fraction of a second. The
server binds the socket itself and reports its own failure: no check that
another process could race.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Sequence
from typing import Any

from .._names import host_port
from ..exceptions import AddressInUse, BootstrapError
from .portinfo import describe_holder

__all__ = ["BACKLOG", "AddressInUse", "bind_each", "bind_sockets", "explain_address_in_use"]

BACKLOG = 4096
"""Room for a whole deployment's ranks connecting at once (the kernel caps it at somaxconn)."""


def bind_sockets(host: str, port: int) -> list[socket.socket]:
    """Listening TCP sockets on every address ``host`` resolves to, all on one port; 0 lets the system choose.

    ``localhost`` is usually 127.0.0.1 and ::1: a client may try either, so
    both are served. An address this machine cannot bind (no IPv6, say) is
    skipped unless it is the only one.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BootstrapError(f"Cannot listen on {host_port(host, port)}: {exc.strerror}.") from None
    addresses: list[tuple[socket.AddressFamily, socket.SocketKind, int, tuple[Any, ...]]] = []
    for info in infos:
        if all(info[4][:2] != known[3][:2] for known in addresses):
            addresses.append((info[0], info[1], info[2], info[4]))
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, address in addresses:
            if sockets:  # the others take the port the first one got
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            try:
                sockets.append(_listen(family, kind, proto, address, several=len(addresses) > 1))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise AddressInUse(host, port) from None
                if len(addresses) > 1 and exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                    continue
                raise BootstrapError(f"Cannot listen on {host_port(host, port)}: {exc.strerror}.") from None
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    if not sockets:
        raise BootstrapError(
            f"Cannot listen on {host_port(host, port)}: none of its addresses is this machine's."
        )
    return sockets


def bind_each(addresses: Sequence[tuple[str, int]]) -> list[list[socket.socket]]:
    """:func:`bind_sockets` for each ``(host, port)``, in order (the ``--listen`` listeners): the sockets of
    each. On a failure (raised as :func:`bind_sockets` raises it) those bound already are closed."""
    bound: list[list[socket.socket]] = []
    try:
        for host, port in addresses:
            bound.append(bind_sockets(host, port))
    except BaseException:
        for socks in bound:
            for sock in socks:
                sock.close()
        raise
    return bound


def _listen(
    family: socket.AddressFamily, kind: socket.SocketKind, proto: int, address: tuple[Any, ...], several: bool
) -> socket.socket:
    sock = socket.socket(family, kind, proto)
    try:
        # Lets a restarted server take its port back from connections in
        # TIME_WAIT; on Linux it never lets two servers share a live port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if several and family == socket.AF_INET6:
            # Beside its IPv4 twin (0.0.0.0 next to ::), an IPv6 socket takes IPv6 alone.
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def explain_address_in_use(error: AddressInUse, remedy: str | None = None) -> AddressInUse:
    """``error`` with the holder of the port named, where that can be found out, and ``remedy``
    (the way out for its caller: ``--port`` for the CLI) in place of the error's own.

    Blocks briefly (reads /proc and asks the holder's /health): call it in a
    worker thread from a running loop.
    """
    holder = describe_holder(error.host, error.port)
    return AddressInUse(error.host, error.port, holder, error.remedy if remedy is None else remedy)
