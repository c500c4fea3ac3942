"""The Redis feed's watcher tells a real gap from a reader that ran ahead of its poll.

The watcher reads the store's change counter on a command connection while the
reader follows the feed on its own: a change can reach the reader while the
poll's reply is on its way, and the counter the poll read is then behind what
the reader has seen. That is no counter going back: a watcher that took it for
one restarted the reader with a resync, and watchers of that replica were told
``410`` and missed changes on a healthy Redis (issue 30, F2).
"""

from __future__ import annotations

from typing import Any

from aiobootstrap._names import TRANSFER_ENGINE_INFO
from aiobootstrap.store import Key
from aiobootstrap.store.redis import RedisStore
from testbed.redis_server import RedisServer

from .helpers.redis_store import FAST, Recorder


def _key(rank: int) -> Key:
    return Key("default", TRANSFER_ENGINE_INFO, "default", rank)


async def test_a_reader_ahead_of_the_watchers_poll_is_no_counter_gone_back(redis_server: RedisServer) -> None:
    """Each poll of the watcher is answered only after a change it did not count has reached the
    reader (as with a command connection slower than the feed's): no resync, every change heard."""
    store = RedisStore(redis_server.url, timeout=FAST["timeout"], poll_interval=FAST["poll_interval"])
    heard = Recorder()
    await store.open(heard)
    feed: Any = store._feed
    real_poll = feed.poll
    polls = 0

    async def a_poll_overtaken_by_the_reader() -> tuple[str, int, bytes | str]:
        nonlocal polls
        position: tuple[str, int, bytes | str] = await real_poll()
        polls += 1
        await store.put(_key(polls), {"session_id": f"s{polls}"})
        await heard.until(lambda: feed._last_seq > position[1])
        return position  # the counter as the poll read it, before the change the reader has seen

    feed.poll = a_poll_overtaken_by_the_reader
    try:
        await heard.until(lambda: polls >= 4)
        assert heard.resyncs == 0
        versions = sorted(change.version for change in heard.changes)
        assert versions == list(range(1, len(versions) + 1))
    finally:
        feed.poll = real_poll
        await store.close()
