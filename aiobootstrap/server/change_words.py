"""How ``GET /watch`` shows the changes the history logged: each kind's own words, or the generic form.

The history (``core/history``) keeps store-level changes
(:class:`~aiobootstrap.core.history.LoggedChange`: a record put or deleted,
a set record's member added or removed) and knows no wire. A face that
owns a kind may say how a change of it is shown (``KindSpec.describe_change``:
the JSON objects of the changes a watcher is told, none to hide it); every
other kind's change is shown in the generic form, by its key:

- a rank's record: ``{"op", "kind", "role", "rank", "version"}``;
- a named record: ``{"op", "kind", "key", "version"}``, ``key`` its name;
- a set record's member, when the kind has no words of its own: the rank's
  form with ``"member"`` before ``version``.

:class:`ChangeWords` holds the kinds' words (one per app, ``CHANGE_WORDS``,
made from the faces' kinds) and writes a long-poll's reply
(``wire.watch.encode_watch``) and a stream's events (``wire.watch.sse_event``) of
logged changes. :meth:`ChangeWords.shown` is what the history asks of each
change before keeping it: a change no watcher is shown is not kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from ..core.history import LoggedChange
from ..wire.watch import encode_watch, sse_event
from .kind_spec import KindSpec

__all__ = ["CHANGE_WORDS", "ChangeWords", "Describe", "generic_change"]

Describe = Callable[[LoggedChange], list[dict[str, Any]]]
"""A kind's words for a change (``KindSpec.describe_change``): what ``/watch`` shows of it, in order."""


def generic_change(change: LoggedChange) -> dict[str, Any]:
    """The generic form of ``change`` (see the module's notes)."""
    if change.name is not None:
        return {"op": change.op, "kind": change.kind, "key": change.name, "version": change.version}
    if change.member is not None:
        return {
            "op": change.op,
            "kind": change.kind,
            "role": change.role,
            "rank": change.rank,
            "member": change.member,
            "version": change.version,
        }
    return {
        "op": change.op,
        "kind": change.kind,
        "role": change.role,
        "rank": change.rank,
        "version": change.version,
    }


class ChangeWords:
    """The words ``/watch`` shows logged changes in: each kind's own (``KindSpec.describe_change``), or the
    generic form."""

    __slots__ = ("_describe",)

    def __init__(self, kinds: Mapping[str, KindSpec] | None = None) -> None:
        self._describe: dict[str, Describe] = {
            name: spec.describe_change
            for name, spec in (kinds or {}).items()
            if spec.describe_change is not None
        }

    @property
    def hides(self) -> bool:
        """Whether some kind has words of its own, which may hide a change (the history asks :meth:`shown`)."""
        return bool(self._describe)

    def shown(self, change: LoggedChange) -> bool:
        """Whether a watcher is shown ``change`` at all (the history keeps only those)."""
        describe = self._describe.get(change.kind)
        return describe is None or bool(describe(change))

    def of(self, change: LoggedChange) -> list[dict[str, Any]]:
        """What ``/watch`` shows of ``change``."""
        describe = self._describe.get(change.kind)
        return [generic_change(change)] if describe is None else describe(change)

    def described(self, changes: Sequence[LoggedChange]) -> list[dict[str, Any]]:
        """What ``/watch`` shows of ``changes``, in order."""
        words = self._describe
        if not words:
            return [generic_change(change) for change in changes]
        return [shown for change in changes for shown in self.of(change)]

    def reply(
        self,
        changes: Sequence[LoggedChange],
        version: int,
        *,
        waits: int | None = None,
        findings: int | None = None,
    ) -> bytes:
        """A long-poll's reply of ``changes`` (``wire.watch.encode_watch``)."""
        return encode_watch(self.described(changes), version, waits=waits, findings=findings)

    def events(self, change: LoggedChange) -> bytes:
        """A stream's events of ``change``: one per change shown (``wire.watch.sse_event``)."""
        return b"".join(map(sse_event, self.of(change)))


CHANGE_WORDS = web.AppKey("change_words", ChangeWords)
"""The app's words for its changes, made from its faces' kinds."""
