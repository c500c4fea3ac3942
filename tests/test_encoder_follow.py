"""The in-process encoder server follows the encoder list through the core's subscription, parking no wait:
its own changes, HTTP ones, and another replica's over a shared store (told by key only, then read)."""

from __future__ import annotations

from typing import Any

from aiobootstrap import EncoderBootstrapServer

from .threads import wait_until


def test_the_list_follows_another_replicas_changes_and_no_wait_is_parked(shared_redis: Any) -> None:
    """Two in-process servers over one Redis: a URL registered through one is in the other's list, with no
    wait parked in either to hear it (a plain subscription to the encoder lists' changes)."""
    options = {"store": shared_redis.url, "store_prefix": "encoder-follow", "health_check_interval": 0}
    mine: list[str] = []
    theirs: list[str] = []
    with (
        EncoderBootstrapServer("127.0.0.1", 0, urls=mine, **options) as a,
        EncoderBootstrapServer("127.0.0.1", 0, urls=theirs, **options) as b,
    ):
        assert a.register("http://10.0.0.9:8000") is True
        wait_until(lambda: theirs == ["http://10.0.0.9:8000"])
        assert b.unregister("http://10.0.0.9:8000") is True
        wait_until(lambda: mine == [])
        assert (a.parked, b.parked) == (0, 0)


def test_a_change_landing_while_the_list_is_first_read_is_in_the_list(monkeypatch: Any) -> None:
    """A URL registered while the server reads the list at start (another replica's, say, landing while the
    read is on its way back) is in the caller's list: the server hears changes from before its first read,
    not from after it, so the stale read cannot hide it."""
    from aiobootstrap._names import DEFAULT_NAMESPACE, ENCODER_URLS
    from aiobootstrap.core.registry import Registry
    from aiobootstrap.server.faces.encoders.health import add_url

    read = Registry.get
    landed: list[str] = []

    async def get(self: Registry, key: Any) -> Any:
        record = await read(self, key)
        if key.kind == ENCODER_URLS and not landed:
            landed.append("http://10.0.0.5:8000")  # written after the read, before its answer is used
            await add_url(self, DEFAULT_NAMESPACE, landed[0])
        return record

    monkeypatch.setattr(Registry, "get", get)
    with EncoderBootstrapServer("127.0.0.1", 0, health_check_interval=0) as server:
        assert landed
        assert server.list_urls() == ["http://10.0.0.5:8000"]
