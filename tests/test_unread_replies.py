"""200 batch replies of a 4 MiB record that nobody reads, at the size issue 41 (item 11) re-measured them.

F5 of the last round: ``/health`` max 2,151 ms and the memory held growing with each reader, when each
reply of a different set was the items joined into a new ``bytes`` (800 MiB for 200 readers).
``tests/test_big_reply_bytes.py`` pins the mechanism with 16 readers; here the count is the issue's, over
real sockets: what the server holds per reader (``tracemalloc``), and ``/health`` answered while they stall.
How long it takes is ``bench.parked_load``'s (a ratio against as many readers of a small record).
"""

from __future__ import annotations

import asyncio
import gc
import io
import json
import socket
import tracemalloc
from typing import Any

from aiobootstrap import ServerConfig, create_app

from .helpers.registry import registration
from .helpers.waits import GUARD, until

BIG = 4 << 20
READERS = 200
HELD_EACH = 1 << 20
"""The most one reader that reads nothing may hold on the server: a slice in its transport's buffer."""


async def _reader(host: str, port: int, target: str) -> socket.socket:
    """A client that sends its request and reads nothing (a small receive buffer: it fills at once)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await loop.sock_connect(sock, (host, port))
    await loop.sock_sendall(sock, f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


async def test_two_hundred_unread_batch_replies_of_a_big_record_hold_it_once(aiohttp_client: Any) -> None:
    """Each reader holds at most a slice on the server (800 MiB for 200 before F5), and ``/health`` is served
    while all 200 stall."""
    client = await aiohttp_client(create_app(ServerConfig()))
    big = json.dumps(registration(0, weights={"w": "x" * BIG})).encode()
    assert (await client.put("/register_transfer_engine_info", data=io.BytesIO(big))).status == 200
    for rank in range(1, READERS + 1):
        assert (await client.put("/register_transfer_engine_info", json=registration(rank))).status == 200
    warm = await client.get(
        "/get_transfer_engine_info", params={"rank": "0"}, headers={"Connection": "close"}
    )
    assert len(await warm.read()) > BIG  # the record's body, encoded once and cached from here on
    server = client.server.handler
    gc.collect()
    tracemalloc.start()
    readers: list[socket.socket] = []
    try:
        before = tracemalloc.get_traced_memory()[0]
        async with asyncio.timeout(GUARD * 3):
            for rank in range(1, READERS + 1):
                readers.append(
                    await _reader(client.host, client.port, f"/get_transfer_engine_info_batch?ranks=0,{rank}")
                )

            def stalled() -> int:
                handlers = server.connections  # a new list each time
                return sum(1 for h in handlers if h.transport and h.transport.get_write_buffer_size() > 0)

            await until(lambda: stalled() == READERS, GUARD * 3)
        held = tracemalloc.get_traced_memory()[0] - before
        assert held < READERS * HELD_EACH, f"{held / READERS / 1024:.0f} KiB held per reader"
        health = await client.get("/health", headers={"Connection": "close"})  # the loop serves others
        assert (health.status, await health.text()) == (200, "OK")
    finally:
        tracemalloc.stop()
        for reader in readers:
            reader.close()
