"""Subscribers: who hears what the core publishes, each in the order it subscribed.

The core tells its host three things, each through one :class:`Subscribers`:
the registry's deliveries (``Registry.deliveries``: a record handed to a
key's waiters, or ``None`` for a key deleted), the history's changed
namespaces (``History.changed_namespaces``) and each step of a tally
(``Tally.steps``: the waits parked or gone, the encoder probes' findings).

A subscriber is a plain callable. It is called in the step that publishes,
so it must not block; what it schedules with ``call_soon`` runs after that
step. One that raises is logged and the others still hear the event: a host's
bug never reaches the store's feed. Subscribing returns the way to
unsubscribe; a second subscriber never replaces the first.

Publishing is one call, however many subscribe (none included): the
subscribers are kept as a tuple, replaced (never changed in place) by a
subscription, so an event being published while someone subscribes is told
to those it began with.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, ParamSpec

__all__ = ["Subscribers"]

log = logging.getLogger("aiobootstrap")

P = ParamSpec("P")


class Subscribers(Generic[P]):
    """The callables told of one kind of event, in the order they subscribed (see the top)."""

    __slots__ = ("_callbacks", "_what")

    def __init__(self, what: str) -> None:
        """``what``: the events, as a log line names them when a subscriber fails."""
        self._what = what
        self._callbacks: tuple[Callable[P, None], ...] = ()

    def subscribe(self, callback: Callable[P, None]) -> Callable[[], None]:
        """Tell ``callback`` of each event from now on; call what this returns to stop."""
        self._callbacks = (*self._callbacks, callback)

        def unsubscribe() -> None:
            callbacks = list(self._callbacks)
            for at, subscribed in enumerate(callbacks):
                if subscribed is callback:
                    del callbacks[at]
                    self._callbacks = tuple(callbacks)
                    return

        return unsubscribe

    def __len__(self) -> int:
        return len(self._callbacks)

    def publish(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Call every subscriber with the event, in order; one that raises is logged, not raised."""
        for callback in self._callbacks:
            try:
                callback(*args, **kwargs)
            except Exception:
                log.exception("A subscriber to %s failed", self._what)
