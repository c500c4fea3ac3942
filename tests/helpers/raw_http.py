"""HTTP/1.x spoken by hand over a socket to a served app (``served_app.py``), so that a reply is read
byte by byte: the request variants, a request written, a reply read back, and two replies compared."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from .served_app import Served
from .waits import GUARD


@dataclass
class Reply:
    status_line: str
    headers: dict[str, str]
    body: bytes


async def _connect(served: Served) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", served.port)


def _request(path: str, *, method: str = "GET", version: str = "1.1", extra: str = "") -> bytes:
    return f"{method} {path} HTTP/{version}\r\nHost: test\r\n{extra}\r\n".encode()


async def _read_reply(reader: asyncio.StreamReader, *, head_only: bool = False) -> Reply:
    async with asyncio.timeout(GUARD):
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        status_line, *lines = head[:-4].split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            assert name.title() not in headers, f"header {name} sent twice"
            headers[name.title()] = value.strip()
        length = 0 if head_only else int(headers["Content-Length"])
        body = await reader.readexactly(length)
    return Reply(status_line, headers, body)


async def _closed(reader: asyncio.StreamReader) -> bool:
    async with asyncio.timeout(GUARD):
        return await reader.read() == b""


VARIANTS = {
    "1.1 keep-alive": ("GET", "1.1", ""),
    "1.1 close": ("GET", "1.1", "Connection: close\r\n"),
    "1.0": ("GET", "1.0", ""),
    "1.0 keep-alive": ("GET", "1.0", "Connection: keep-alive\r\n"),
    "HEAD": ("HEAD", "1.1", ""),
    "HEAD 1.0": ("HEAD", "1.0", ""),
}


def _same(ours: Reply, theirs: Reply) -> None:
    assert ours.status_line == theirs.status_line
    assert ours.body == theirs.body
    for header in ("Date", "X-Aiobootstrap-Boot"):
        assert ours.headers.pop(header)
        assert theirs.headers.pop(header)
    assert list(ours.headers.items()) == list(theirs.headers.items())  # in the same order too
