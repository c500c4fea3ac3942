"""One store listener that hands the feed to several (the registry and the history, in order)."""

from __future__ import annotations

from collections.abc import Sequence

from ...store import Change, ChangeListener

__all__ = ["listeners"]


def listeners(*listening: ChangeListener) -> ChangeListener:
    """One listener that hands the store's feed to each of ``listening``, in order."""

    class _All:
        def changed(self, changes: Sequence[Change]) -> None:
            for listener in listening:
                listener.changed(changes)

        def resync(self) -> None:
            for listener in listening:
                listener.resync()

    return _All()
