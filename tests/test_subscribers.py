"""The core's subscriptions (``core/subscribers.py``): every subscriber hears, in order, until it unsubscribes.

The registry's deliveries, the history's changed namespaces and a tally's
steps are each published to a :class:`Subscribers`: a second subscriber
never replaces the first, and one that raises does not keep the others
(or the core) from going on.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from aiobootstrap.core.history import History
from aiobootstrap.core.subscribers import Subscribers
from aiobootstrap.core.tally import Tally
from aiobootstrap.store import Change, Key, Record

from .helpers.registry import info_key, open_registry, register_in
from .helpers.waits import GUARD, until


def test_two_subscribers_both_hear_in_the_order_they_subscribed() -> None:
    """The second subscriber is added beside the first, not in its place."""
    heard: list[tuple[str, int]] = []
    events: Subscribers[int] = Subscribers("test events")
    events.subscribe(lambda value: heard.append(("first", value)))
    events.subscribe(lambda value: heard.append(("second", value)))
    events.publish(1)
    assert heard == [("first", 1), ("second", 1)]


def test_an_unsubscribed_callback_hears_no_more() -> None:
    """Unsubscribing stops that subscriber only; unsubscribing twice does nothing more."""
    heard: list[tuple[str, int]] = []
    events: Subscribers[int] = Subscribers("test events")
    stop_first = events.subscribe(lambda value: heard.append(("first", value)))
    events.subscribe(lambda value: heard.append(("second", value)))
    stop_first()
    stop_first()
    events.publish(2)
    assert heard == [("second", 2)]
    assert len(events) == 1


def test_the_same_callable_subscribed_twice_hears_twice_and_leaves_once_per_unsubscribe() -> None:
    """Each subscription is its own: its unsubscribe removes one of them."""
    heard: list[int] = []
    events: Subscribers[int] = Subscribers("test events")
    first = events.subscribe(heard.append)
    events.subscribe(heard.append)
    events.publish(1)
    first()
    events.publish(2)
    assert heard == [1, 1, 2]


def test_a_failing_subscriber_is_logged_and_the_next_still_hears(caplog: pytest.LogCaptureFixture) -> None:
    """What a subscriber raises is logged with the events' name, never raised to the publisher."""
    heard: list[int] = []

    def boom(value: int) -> None:
        raise RuntimeError("boom")

    events: Subscribers[int] = Subscribers("test events")
    events.subscribe(boom)
    events.subscribe(heard.append)
    with caplog.at_level(logging.ERROR, logger="aiobootstrap"):
        events.publish(3)
    assert heard == [3]
    assert "A subscriber to test events failed" in caplog.text


def test_a_subscriber_added_while_publishing_hears_the_next_event() -> None:
    """An event being published goes to those subscribed when it began."""
    heard: list[str] = []
    events: Subscribers[[]] = Subscribers("test events")

    def first() -> None:
        heard.append("first")
        events.subscribe(lambda: heard.append("late"))

    events.subscribe(first)
    events.publish()
    assert heard == ["first"]


async def test_a_tallys_steps_reach_every_subscriber_and_its_readers() -> None:
    """Tally: two subscribers hear each step, and a reader awaiting past the count is still answered."""
    tally = Tally("test steps")
    heard: list[str] = []
    tally.steps.subscribe(lambda: heard.append("a"))
    stop_b = tally.steps.subscribe(lambda: heard.append("b"))
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
    first: list[tuple[Key, Record | None]] = []
    second: list[tuple[Key, Record | None]] = []
    registry.deliveries.subscribe(lambda key, record: first.append((key, record)))
    registry.deliveries.subscribe(lambda key, record: second.append((key, record)))
    waiter = asyncio.ensure_future(registry.wait(info_key(4), timeout=GUARD))
    await until(lambda: registry.parked == 1)
    record = await register_in(registry, 4, "s", {})
    async with asyncio.timeout(GUARD):
        assert await waiter == record
    assert first == second == [(info_key(4), record)]


async def test_the_historys_changed_namespaces_reach_two_subscribers() -> None:
    """Two subscribers of the history hear the namespace of a change; one unsubscribed hears no more."""
    registry = await open_registry()
    history = History(registry.store)
    await history.open()
    first: list[str] = []
    second: list[str] = []
    history.changed_namespaces.subscribe(first.append)
    stop_second = history.changed_namespaces.subscribe(second.append)
    history.changed([_change(1)])
    stop_second()
    history.changed([_change(2)])
    assert first == ["default", "default"]
    assert second == ["default"]


def _change(version: int) -> Change:
    return Change(info_key(version), version, deleted=True)
