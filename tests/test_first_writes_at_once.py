"""Two first writes at the same moment through a file-store server are both answered (issue 41, item 1).

A compare-and-set against a write still being journaled used to return at once, while a read saw only
written records: the prefill face's ``PUT /route`` and Mooncake's ``rpc_meta`` ``PUT`` looped read,
compare, read without ever yielding, so the journal's writer never ran and the server hung for good (the
loop spinning, SIGTERM unheard). The server runs as a subprocess here, so a hang fails the test (and the
process is killed) rather than the test run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from urllib.parse import quote

import aiohttp

from .helpers.cli import serve
from .helpers.prefill import rank_body

ANSWERED = 5.0
"""Seconds both writes must be answered within (a hang is for ever; an answer takes milliseconds)."""


async def _at_once(url: str, method: str, path: str, bodies: list[bytes]) -> list[int]:
    async with aiohttp.ClientSession() as session, asyncio.timeout(ANSWERED):

        async def one(body: bytes) -> int:
            async with session.request(method, url + path, data=body) as reply:
                await reply.read()
                return reply.status

        return list(await asyncio.gather(*(one(body) for body in bodies)))


async def test_two_first_prefill_ranks_at_once_are_both_registered(tmp_path: Path) -> None:
    """Every prefill rank starts at once: the first two PUT /route of a fresh namespace are both 200."""
    served = serve("--state-file", str(tmp_path / "state.journal"))
    try:
        bodies = [json.dumps(rank_body(tp, 0)).encode() for tp in (0, 1)]
        assert await _at_once(served.url, "PUT", "/route", bodies) == [200, 200]
        async with (
            aiohttp.ClientSession() as session,
            asyncio.timeout(ANSWERED),
            session.get(served.url + "/prefill") as reply,
        ):
            assert (await reply.json())["registered"] == 2
    finally:
        served.process.kill()
        served.process.communicate()


async def test_two_first_rpc_entries_of_one_key_at_once_are_answered(tmp_path: Path) -> None:
    """Two engines claim one new rpc_meta key at once: one 200, the other a 200 (the same value) or the 400."""
    served = serve("--state-file", str(tmp_path / "state.journal"))
    path = "/metadata?key=" + quote("mooncake/rpc_meta/127.0.0.1:53925", safe="")
    try:
        same = b'{"ip_or_host_name":"10.0.0.1","rpc_port":1}'
        assert await _at_once(served.url, "PUT", path, [same, same]) == [200, 200]
        other = b'{"ip_or_host_name":"10.0.0.9","rpc_port":2}'
        path = path.replace("53925", "53926")
        assert sorted(await _at_once(served.url, "PUT", path, [same, other])) == [200, 400]
    finally:
        served.process.kill()
        served.process.communicate()
