"""Ports for a test's own servers that no other test's connection can take in the meantime."""

from __future__ import annotations

import random
import socket

__all__ = ["quiet_port"]

QUIET_PORTS = range(20_000, 32_000)
"""Below Linux's ephemeral range (32768-60999), which every outgoing connection and every ``--port 0``
server of the suite draws from. A server killed and started again on its port (a Redis node after a
failover, the Sentinel quick start's old primary) finds it still free; an ephemeral port can be taken
by any connection in between, and the restart then fails."""


def quiet_port(taken: set[int] | None = None) -> int:
    """A port of :data:`QUIET_PORTS` that nothing holds now and ``taken`` (which it joins) does not hold."""
    while True:
        port = random.choice(QUIET_PORTS)
        if taken is not None and port in taken:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if taken is not None:
            taken.add(port)
        return port
