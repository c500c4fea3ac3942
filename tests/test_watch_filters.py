"""3,000 watches parked with filters of their own cost a change the few it concerns (issue 41, item 11).

They cut a namespace's registrations from 774 a second to 10 (F3 of the last round): each change woke every
parked watch to look at the log and park again, and the fast path looked at every group. Counted here in
watches woken and looks at the log per change, at the size the issue names; the rate itself is
``bench.parked_load``'s (a ratio against a baseline of the same run).
"""

from __future__ import annotations

import asyncio
from unittest import mock

from aiohttp.test_utils import make_mocked_request

from aiobootstrap._ranks import RankSet
from aiobootstrap.core.history import Filter, History, LoggedChange, listeners
from aiobootstrap.core.registry import Registry
from aiobootstrap.server.fastpath.eligible import Eligibility
from aiobootstrap.server.fastpath.prebuilt import Stamp
from aiobootstrap.server.fastpath.watches import WatchReplies
from aiobootstrap.store import MemoryStore

from .helpers.registry import register_in
from .helpers.waits import until

WATCHES = 3000
CHANGES = 50
WANTED = 100_000
"""The first rank a watch filters on (watch ``i`` wants rank ``WANTED + i``; the changes register others)."""


async def _opened() -> tuple[Registry, History]:
    store = MemoryStore()
    registry = Registry(store)
    history = History(store, parking=registry.parking)
    await store.open(listeners(registry, history))
    await history.open()
    return registry, history


ASKED = [0]
"""Filters asked about a change, all watches together."""


class _Counted(Filter):
    """A watch's filter that counts how often it is asked."""

    def __call__(self, change: LoggedChange) -> bool:
        ASKED[0] += 1
        return Filter.__call__(self, change)


def _wants(index: int) -> Filter:
    return _Counted(ranks=RankSet.from_ranks([WANTED + index]))


async def test_a_change_wakes_only_the_parked_watches_it_concerns() -> None:
    """3,000 watches parked, each for its own rank: 50 changes of other ranks wake none of them and ask none of
    their filters (each change woke all 3,000 to ask theirs before: 150,000); a change of one's rank wakes that
    one, which gets it."""
    registry, history = await _opened()
    watches = [
        asyncio.create_task(history.since("default", 0, 60, _wants(index), held=True))
        for index in range(WATCHES)
    ]
    await until(lambda: history.watchers == WATCHES)
    ASKED[0] = 0
    for rank in range(CHANGES):
        await register_in(registry, rank)
        await asyncio.sleep(0)  # any watch woken looks at the log
    assert ASKED[0] == 0
    assert history.woken == 0
    assert not any(watch.done() for watch in watches)
    await register_in(registry, WANTED + 7)
    changes, _ = await asyncio.wait_for(watches[7], 10)
    assert [change.rank for change in changes] == [WANTED + 7]
    assert history.woken == 1
    for watch in watches:
        watch.cancel()
    await asyncio.gather(*watches, return_exceptions=True)


async def test_the_fast_path_looks_at_the_groups_a_change_concerns() -> None:
    """3,000 groups of the fast path, each its own filter: after the first pass (which looks at each new group
    once), a change costs one look at the log, not one per group (150,000 looks for 50 changes before)."""
    registry, history = await _opened()
    replies = WatchReplies(history, registry.parking, Stamp(lambda: "boot"), Eligibility())
    history.changed_namespaces.subscribe(replies)
    transport = mock.Mock()
    transport.is_closing.return_value = False
    request = make_mocked_request("GET", "/watch", transport=transport, writer=mock.Mock(output_size=0))
    for index in range(WATCHES):  # one request for all (making 3,000 takes seconds): each group its own watch
        replies.expect(request, "default", 0, ("ranks", WANTED + index), _wants(index))
    await register_in(registry, 0)
    await asyncio.sleep(0)  # the first pass: every group is new
    looks = 0
    now = history.now

    def counted(*args: object, **kwargs: object) -> object:
        nonlocal looks
        looks += 1
        return now(*args, **kwargs)  # type: ignore[arg-type]

    with mock.patch.object(history, "now", counted):
        for rank in range(1, CHANGES + 1):
            await register_in(registry, rank)
            await asyncio.sleep(0)  # the answering pass, one loop turn after the change
        assert looks == CHANGES
        assert not transport.write.called
        await register_in(registry, WANTED + 7)
        await asyncio.sleep(0)
        assert looks == CHANGES + 2  # the pass's look, and the group's own
    [(data,)] = [call.args for call in transport.write.call_args_list]
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b'"rank":100007' in data


async def test_new_groups_do_not_look_back_over_what_their_handlers_read() -> None:
    """3,000 new groups at ``after=0`` in a namespace with 50 changes: their first pass asks each filter about
    the one change since, not the namespace's 51 (each handler reads the log itself before it parks; the
    pass matching them all again stalled the loop for a second, 153,000 asks)."""
    registry, history = await _opened()
    for rank in range(CHANGES):
        await register_in(registry, rank)
    replies = WatchReplies(history, registry.parking, Stamp(lambda: "boot"), Eligibility())
    history.changed_namespaces.subscribe(replies)
    transport = mock.Mock()
    transport.is_closing.return_value = False
    request = make_mocked_request("GET", "/watch", transport=transport, writer=mock.Mock(output_size=0))
    for index in range(WATCHES):
        replies.expect(request, "default", 0, ("ranks", WANTED + index), _wants(index))
    ASKED[0] = 0
    await register_in(registry, CHANGES)
    await asyncio.sleep(0)  # the first pass
    assert ASKED[0] == WATCHES
    assert not transport.write.called
