"""Subscribers: who hears what the core publishes, each in the order it subscribed.

The core tells its host three things, each through one :class:`Subscribers`
of listeners with one named method, so a reader (or a tool) following a
change through the calls goes from the publisher straight to the method:

- the registry's deliveries (``Registry.deliveries``):
  :meth:`DeliveryListener.delivered`, a record handed to a key's waiters, or
  ``None`` for a key deleted;
- the history's changed namespaces (``History.changed_namespaces``):
  :meth:`NamespaceListener.namespace_changed`;
- each step of a tally (``Tally.steps``: the waits parked or gone, the
  encoder probes' changes): :meth:`CountListener.count_moved`.

A listener is called in the step that publishes, so it must not block; what
it schedules with ``call_soon`` runs after that step. One that raises is
logged (:meth:`Subscribers.failed`) and the others still hear the event: a
host's bug never reaches the store's feed. Subscribing returns the way to
unsubscribe; a second subscriber never replaces the first. The server's fast
path subscribes in one place, ``server/app.py``'s ``_fast_path_context``.

Publishing costs a loop over a tuple, however many subscribe (none
included): the listeners are kept as a tuple, replaced (never changed in
place) by a subscription, so an event being published while someone
subscribes is told to those it began with.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from ..store import Key, Record

__all__ = ["CountListener", "DeliveryListener", "NamespaceListener", "Subscribers"]

log = logging.getLogger("aiobootstrap")

L = TypeVar("L")


class DeliveryListener(Protocol):
    """Hears the registry's deliveries (the server's ``GetReplies``)."""

    def delivered(self, key: Key, record: Record | None) -> None:
        """``record`` is about to wake ``key``'s waiters; ``None``: ``key`` was deleted."""


class NamespaceListener(Protocol):
    """Hears the namespaces whose watch history a change reached (the server's ``WatchReplies``)."""

    def namespace_changed(self, namespace: str) -> None:
        """``namespace``'s history has new changes; its watchers are about to wake."""


class CountListener(Protocol):
    """Hears each step of a tally (the server's ``WatchReplies``, for the page's watches)."""

    def count_moved(self) -> None:
        """The tally went up by one."""


class Subscribers(Generic[L]):
    """The listeners told of one kind of event, in the order they subscribed (see the top).

    The publisher calls each listener's method itself, in a ``try`` whose
    ``except Exception`` calls :meth:`failed`.
    """

    __slots__ = ("_what", "listeners")

    def __init__(self, what: str) -> None:
        """``what``: the events, as a log line names them when a listener fails."""
        self._what = what
        self.listeners: tuple[L, ...] = ()
        """Who listens now: a tuple, replaced (never changed in place) by each subscription. A publisher on
        the busiest way (the history, at every write) iterates it without :meth:`__iter__`'s call."""

    def subscribe(self, listener: L) -> Callable[[], None]:
        """Tell ``listener`` of each event from now on; call what this returns to stop."""
        self.listeners = (*self.listeners, listener)
        done = False

        def unsubscribe() -> None:
            nonlocal done
            if done:
                return
            done = True
            listeners = list(self.listeners)
            for at, subscribed in enumerate(listeners):
                if subscribed is listener:
                    del listeners[at]
                    self.listeners = tuple(listeners)
                    return

        return unsubscribe

    def __len__(self) -> int:
        return len(self.listeners)

    def __iter__(self) -> Iterator[L]:
        """The listeners subscribed now, in order (a tuple's: a subscription meanwhile is not seen)."""
        return iter(self.listeners)

    def failed(self) -> None:
        """Log the exception a listener raised (called from the publisher's ``except``): never raised on."""
        log.exception("A subscriber to %s failed", self._what)
