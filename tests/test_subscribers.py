"""The core's subscriptions (``core/subscribers.py``): every listener hears, in order, until it unsubscribes.

The registry's deliveries, the history's changed namespaces and a tally's
steps are each published to a :class:`Subscribers` of listeners with one
named method: a second subscriber never replaces the first, and one that
raises does not keep the others (or the core) from going on.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from aiobootstrap.core.history import History
from aiobootstrap.core.tally import Tally
from aiobootstrap.store import Change, Key, Record

from .helpers.registry import info_key, open_registry, register_in
from .helpers.waits import GUARD, until


class Counter:
    """A tally's listener that writes down its name at each step (and raises, when told to)."""

    def __init__(self, name: str, heard: list[str], *, fails: bool = False) -> None:
        self.name, self.heard, self.fails = name, heard, fails

    def count_moved(self) -> None:
        if self.fails:
            raise RuntimeError("boom")
        self.heard.append(self.name)


class Deliveries:
    """A listener of the registry's deliveries that keeps what it heard."""

    def __init__(self) -> None:
        self.heard: list[tuple[Key, Record | None]] = []

    def delivered(self, key: Key, record: Record | None) -> None:
        self.heard.append((key, record))


class Namespaces:
    """A listener of the history's changed namespaces that keeps what it heard."""

    def __init__(self) -> None:
        self.heard: list[str] = []

    def namespace_changed(self, namespace: str) -> None:
        self.heard.append(namespace)


def test_two_subscribers_both_hear_in_the_order_they_subscribed() -> None:
    """The second subscriber is added beside the first, not in its place."""
    heard: list[str] = []
    tally = Tally("test steps")
    tally.steps.subscribe(Counter("first", heard))
    tally.steps.subscribe(Counter("second", heard))
    tally.step()
    assert heard == ["first", "second"]


def test_an_unsubscribed_listener_hears_no_more() -> None:
    """Unsubscribing stops that subscriber only; unsubscribing twice does nothing more."""
    heard: list[str] = []
    tally = Tally("test steps")
    stop_first = tally.steps.subscribe(Counter("first", heard))
    tally.steps.subscribe(Counter("second", heard))
    stop_first()
    stop_first()
    tally.step()
    assert heard == ["second"]
    assert len(tally.steps) == 1


def test_the_same_listener_subscribed_twice_hears_twice_and_leaves_once_per_unsubscribe() -> None:
    """Each subscription is its own: its unsubscribe removes one of them, and only once."""
    heard: list[str] = []
    tally = Tally("test steps")
    counter = Counter("one", heard)
    first = tally.steps.subscribe(counter)
    tally.steps.subscribe(counter)
    tally.step()
    first()
    first()
    tally.step()
    assert heard == ["one", "one", "one"]
    assert len(tally.steps) == 1


def test_a_failing_listener_is_logged_and_the_next_still_hears(caplog: pytest.LogCaptureFixture) -> None:
    """What a listener raises is logged with the events' name, never raised to the publisher."""
    heard: list[str] = []
    tally = Tally("test steps")
    tally.steps.subscribe(Counter("boom", heard, fails=True))
    tally.steps.subscribe(Counter("next", heard))
    with caplog.at_level(logging.ERROR, logger="aiobootstrap"):
        tally.step()
    assert heard == ["next"]
    assert tally.count == 1
    assert "A subscriber to test steps failed" in caplog.text


def test_a_listener_added_while_publishing_hears_the_next_event() -> None:
    """An event being published goes to those subscribed when it began."""
    heard: list[str] = []
    tally = Tally("test steps")

    class Adder(Counter):
        def count_moved(self) -> None:
            super().count_moved()
            if len(tally.steps) == 1:
                tally.steps.subscribe(Counter("late", heard))

    tally.steps.subscribe(Adder("first", heard))
    tally.step()
    assert heard == ["first"]
    tally.step()
    assert heard == ["first", "first", "late"]


async def test_a_tallys_steps_reach_every_subscriber_and_its_readers() -> None:
    """Tally: two subscribers hear each step, and a reader awaiting past the count is still answered."""
    tally = Tally("test steps")
    heard: list[str] = []
    tally.steps.subscribe(Counter("a", heard))
    stop_b = tally.steps.subscribe(Counter("b", heard))
    reader = asyncio.ensure_future(tally.past(0, GUARD))
    await asyncio.sleep(0)
    tally.step()
    stop_b()
    tally.step()
    async with asyncio.timeout(GUARD):
        await reader
    assert heard == ["a", "b", "a"]
    assert tally.count == 2


async def test_the_registrys_deliveries_reach_two_subscribers() -> None:
    """Two subscribers of the registry's deliveries both hear a record delivered to a waiter."""
    registry = await open_registry()
    first, second = Deliveries(), Deliveries()
    registry.deliveries.subscribe(first)
    registry.deliveries.subscribe(second)
    waiter = asyncio.ensure_future(registry.wait(info_key(4), timeout=GUARD))
    await until(lambda: registry.parked == 1)
    record = await register_in(registry, 4, "s", {})
    async with asyncio.timeout(GUARD):
        assert await waiter == record
    assert first.heard == second.heard == [(info_key(4), record)]


async def test_the_historys_changed_namespaces_reach_two_subscribers() -> None:
    """Two subscribers of the history hear the namespace of a change; one unsubscribed hears no more."""
    registry = await open_registry()
    history = History(registry.store)
    await history.open()
    first, second = Namespaces(), Namespaces()
    history.changed_namespaces.subscribe(first)
    stop_second = history.changed_namespaces.subscribe(second)
    history.changed([_change(1)])
    stop_second()
    history.changed([_change(2)])
    assert first.heard == ["default", "default"]
    assert second.heard == ["default"]


def _change(version: int) -> Change:
    return Change(info_key(version), version, deleted=True)
