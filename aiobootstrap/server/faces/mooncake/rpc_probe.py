"""One probe of a Mooncake engine's RPC address, bounded in what it reads and where it connects, and the
address an ``rpc_meta`` value holds, read once per version and only from a small value.

The probe is the engines' own: their handshake's probe frame (a little-endian
``uint64`` length, the type byte, a JSON body). An engine answers with a frame
of the same type (30 bytes in all: ``{"status":"success"}``), shuts its side,
and waits for ours to close (else it logs two warnings a probe). So a probe
reads that frame, at most :data:`REPLY_LIMIT` bytes of it, then the end of the
stream: anything but the end past the frame is no engine, and the connection
is closed at once. A peer that streams bytes costs a few KiB, never more.

With ``--mooncake-probe-networks`` a probe connects only to an address in those
networks: an IP outside them is not probed (its keys are left alone, as an
``rpc_port`` of 0 is), and a host name is resolved within the probe's time
and the probe connects to the first address it resolves to that is inside.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
import struct
from typing import Any

from ..rounds import HeldUp, in_own_time
from .settings import Networks

__all__ = ["REPLY_LIMIT", "RPC_META_LIMIT", "probe", "rpc_address", "rpc_value"]


_PROBE = 3
"""The handshake's probe type (Mooncake's ``HandShakeRequestType::Probe``); the reply carries it back."""
REPLY_LIMIT = 1024
"""The most bytes a probe reads of a reply's frame, and then past it (an engine's whole reply is 30 bytes)."""
RPC_META_LIMIT = 4096
"""The longest ``rpc_meta`` value (characters) the probes and ``GET /mooncake`` read: an engine's is ~60;
a longer one is not probed and its keys are left alone."""


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None  # a host name


def _inside(host: str, networks: Networks) -> bool:
    address = _ip(host)
    return address is not None and any(address in network for network in networks)


def rpc_value(value: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON object a small ``rpc_meta`` value holds; ``None`` for a value too long, or not an object
    (its length is checked before a byte of it is parsed)."""
    text = value.get("text")
    if not isinstance(text, str) or len(text) > RPC_META_LIMIT:
        return None  # not UTF-8 (so not an engine's JSON), or far past any engine's entry
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def rpc_address(value: dict[str, Any], networks: Networks = ()) -> tuple[str, int] | None:
    """The RPC address to probe that an ``rpc_meta`` value holds: ``None`` when it holds none (too long,
    no such fields, port 0), or, with ``networks``, an IP outside them."""
    parsed = rpc_value(value)
    if parsed is None:
        return None
    host, port = parsed.get("ip_or_host_name"), parsed.get("rpc_port")
    if (
        not isinstance(host, str)
        or isinstance(port, bool)
        or not isinstance(port, int)
        or not 0 < port < 65536
    ):
        return None
    if networks and _ip(host) is not None and not _inside(host, networks):
        return None  # an IP outside: never probed (a host name is resolved at each probe)
    return host, port


async def _allowed(host: str, port: int, networks: Networks) -> str | None:
    """The address inside ``networks`` that ``host`` is, or resolves to first; ``None`` when there is none."""
    if _inside(host, networks):
        return host
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    for info in infos:
        address = str(info[4][0])
        if _inside(address, networks):
            return address
    return None


async def probe(host: str, port: int, timeout: float, networks: Networks = ()) -> bool | None:
    """Whether an engine answers the handshake's probe at ``host:port`` within ``timeout`` seconds of the
    loop's own time (``rounds.in_own_time``); ``None`` when ``networks`` keep the probe from connecting (a
    host name resolving outside them). :class:`~..rounds.HeldUp` when the loop never gave it its time."""
    try:
        return await in_own_time(_exchange(host, port, networks), timeout)
    except HeldUp:
        raise
    except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
        return False


async def _exchange(host: str, port: int, networks: Networks) -> bool | None:
    if networks:
        allowed = await _allowed(host, port, networks)
        if allowed is None:
            return None
        host = allowed
    reader, writer = await asyncio.open_connection(host, port, limit=4 * REPLY_LIMIT)
    try:
        body = b"{}\n"
        writer.write(struct.pack("<Q", len(body) + 1) + bytes([_PROBE]) + body)
        await writer.drain()
        head = await reader.readexactly(9)
        (length,) = struct.unpack("<Q", head[:8])
        if head[8] != _PROBE or not 1 <= length <= REPLY_LIMIT:
            return False
        await reader.readexactly(length - 1)
        # Then the end: the engine shuts its side first. More bytes: no engine; closed at once.
        return await reader.read(REPLY_LIMIT) == b""
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
