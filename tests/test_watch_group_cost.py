"""What a change costs the watch fast path (``fastpath/watches.py``): its new changes per group, not groups x history.

5,000 long-poll watchers, each filtering another ``ranks=``, cut registrations
from ~1,100/s to 4-5/s: each change matched every group against all the
changes since the group's ``after``. A group now remembers how far it found
nothing, so each change is matched once per group. Counted in filter calls,
not time.
"""

from __future__ import annotations

import asyncio
import json
from unittest import mock

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from aiobootstrap.core.history import History, LoggedChange, Match, listeners
from aiobootstrap.core.registry import Registry
from aiobootstrap.server.fastpath.eligible import Eligibility
from aiobootstrap.server.fastpath.prebuilt import Stamp
from aiobootstrap.server.fastpath.watches import WatchReplies
from aiobootstrap.store import MemoryStore

from .helpers.registry import register_in


def _request() -> tuple[web.Request, mock.Mock]:
    transport = mock.Mock()
    transport.is_closing.return_value = False
    request = make_mocked_request("GET", "/watch", transport=transport, writer=mock.Mock(output_size=0))
    return request, transport


async def test_each_change_is_matched_once_per_group_however_long_the_groups_wait() -> None:
    """C groups (each its own rank) and K changes none of them wants cost C x K filter calls, not C x K^2 / 2;
    the group a later change is for still gets every change of its own since its ``after``."""
    store = MemoryStore()
    registry = Registry(store)
    history = History(store, parking=registry.parking)
    await store.open(listeners(registry, history))
    await history.open()
    replies = WatchReplies(history, registry.parking, Stamp(lambda: "boot"), Eligibility())
    history.changed_namespaces.subscribe(replies)
    calls = 0
    groups, changes = 50, 40

    def wants(rank: int) -> Match:
        def match(change: LoggedChange) -> bool:
            nonlocal calls
            calls += 1
            return change.rank == rank

        return match

    writes: list[mock.Mock] = []
    for group in range(groups):
        request, transport = _request()
        writes.append(transport)
        replies.expect(request, "default", 0, ("ranks", 1000 + group), wants(1000 + group))
    for rank in range(changes):
        await register_in(registry, rank, "s", {})
        await asyncio.sleep(0)  # the answering pass, one loop turn after the change
    assert calls == groups * changes
    assert not any(transport.write.called for transport in writes)
    await register_in(registry, 1000 + 7, "s", {})
    await asyncio.sleep(0)
    [(data,)] = [call.args for call in writes[7].write.call_args_list]
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert [change["rank"] for change in json.loads(body)["changes"]] == [1007]
    # Each group's filter asked once per change, and the group it is for once more by the look that answers it.
    assert calls == groups * (changes + 1) + 1
