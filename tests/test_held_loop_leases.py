"""A loop held past a lease's deadline does not expire a worker whose keepalive was already in its socket.

A held loop (a large body parsed, a stalled disk) runs its due timers in the turn it reads the
sockets, and a request's handler a turn later: the expiry beat the keepalive that arrived before
the deadline, answered it ``404`` and deleted the record (issue 30, F1: a 63 MiB registration
beside a worker kept alive every second, every round, on every store). Here the loop is held on
purpose, right after the keepalive is written, until past the deadline.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from aiobootstrap import ServerConfig

from .helpers.registry import registration
from .helpers.waits import GUARD

TTL = 1


@pytest.fixture(params=["memory", "file", "redis"])
def flavor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_kind(flavor: str) -> str:
    return "redis" if flavor == "redis" else "memory"


@pytest.fixture
def config(flavor: str, tmp_path: Any) -> ServerConfig:
    if flavor == "file":
        return ServerConfig(store=f"file:{tmp_path / 'state.journal'}")
    return ServerConfig()


def _keepalive_bytes(lease: str) -> bytes:
    return f"POST /leases/{lease}/keepalive HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()


async def test_a_keepalive_in_the_socket_when_the_loop_is_held_past_the_deadline_keeps_the_lease(
    client: Any,
) -> None:
    """Grant a 1 s lease, register on it, write a keepalive to the server's socket, then hold the
    loop 1.5 s: the keepalive is answered 200 and the record stays."""
    reply = await client.post("/leases", json={"ttl": TTL})
    lease = (await reply.json())["lease"]
    body = {**registration(0), "lease": lease}
    assert (await client.put("/register_transfer_engine_info", json=body)).status == 200
    with socket.create_connection((client.host, client.port)) as raw:
        raw.sendall(_keepalive_bytes(lease))
        time.sleep(TTL + 0.5)  # noqa: ASYNC251 - the loop held, as by a long parse, with the keepalive in its socket
        raw.setblocking(False)
        answer = b""
        async with asyncio.timeout(GUARD):
            loop = asyncio.get_running_loop()
            while b"\r\n\r\n" not in answer:
                chunk = await loop.sock_recv(raw, 4096)
                if not chunk:
                    break
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    got = await client.get("/get_transfer_engine_info", params={"rank": "0"})
    assert got.status == 200
