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

from ._portinfo import describe_holder, host_port
from .exceptions import AddressInUse, BootstrapError

__all__ = ["BACKLOG", "AddressInUse", "bind_socket", "explain_address_in_use"]

BACKLOG = 4096
"""Room for a whole deployment's ranks connecting at once (the kernel caps it at somaxconn)."""


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; port 0 lets the system choose."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise BootstrapError(f"Cannot listen on {host_port(host, port)}: {exc.strerror}.") from None
    sock = socket.socket(family, kind, proto)
    try:
        # Lets a restarted server take its port back from connections in
        # TIME_WAIT; on Linux it never lets two servers share a live port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUse(host, port) from None
        raise BootstrapError(f"Cannot listen on {host_port(host, port)}: {exc.strerror}.") from None
    sock.setblocking(False)
    return sock


def explain_address_in_use(error: AddressInUse) -> AddressInUse:
    """``error`` with the holder of the port named, where that can be found out.

    Blocks briefly (reads /proc and asks the holder's /health): call it in a
    worker thread from a running loop.
    """
    return AddressInUse(error.host, error.port, describe_holder(error.host, error.port))
