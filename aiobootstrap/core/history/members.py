"""The encoder URLs the history knows per namespace, and the URL each list change added or removed.

An encoder list change is one set record's new value (``Store.set_member``):
:class:`Members` diffs it against the members it last knew for the namespace
(read at ``History.open``, then kept from every change) and reports the URL
that joined (``put``) or left (``delete``). One made through another process
sharing a Redis store comes without its record, but names the URL it added or
removed (``Change.member``): told as it is, and applied to the members known.
A change that comes with neither (an entry written before the feed named
members) cannot be diffed: the log's floor rises to its version, so a watcher
behind it is told ``410`` and re-reads the list, never a wrong URL.
"""

from __future__ import annotations

from ..._names import DEFAULT_ROLE, ENCODER_URLS
from ...store import Change, members_of
from ...wire import WatchedChange
from ...wire.watch import Op
from .log import _Log

__all__ = ["Members"]


class Members:
    """The encoder URLs last known per namespace, to tell which one a list change added or removed."""

    def watched_of(self, change: Change, log: _Log) -> list[WatchedChange]:
        """What a watcher is told of ``change``: a rank's change, a named record's, or the URL a list change
        added or removed (none for the evicted set of ``encoder_health``, diffed as a list a revival would
        read as a delete)."""
        key = change.key
        op: Op = "delete" if change.deleted else "put"
        if key.name is not None:
            # A named record (Mooncake's metadata): its name in place of role and rank.
            return [WatchedChange(op, key.kind, change.version, key=key.name)]
        if key.kind != ENCODER_URLS:
            return [WatchedChange(op, key.kind, change.version, role=key.role, rank=key.rank)]
        return [] if key.role != DEFAULT_ROLE else self.watched(change, log)

    def __init__(self) -> None:
        self._members: dict[str, list[str]] = {}
        """The encoder URLs last known per namespace."""
        self._unknown: set[str] | None = set()
        """Namespaces whose encoder URLs are not known (a change came without its value); ``None``: all."""

    def opened(self, namespace: str, members: list[str]) -> None:
        """The list of ``namespace`` as the history read it at open (a change heard meanwhile wins)."""
        if namespace not in self._members:
            self._members[namespace] = members

    def clear(self) -> None:
        """The feed may have missed changes: no namespace's list is known any more."""
        self._members.clear()
        self._unknown = None

    def forget(self, namespace: str) -> None:
        """``namespace``'s log was freed."""
        self._members.pop(namespace, None)

    def watched(self, change: Change, log: _Log) -> list[WatchedChange]:
        """The URLs a change of ``log``'s namespace's encoder list added and removed, as watched changes."""
        namespace = change.key.namespace
        if change.record is None and change.member is not None and not change.deleted:
            return [self._told(namespace, change.member, change.version)]
        if change.record is None:
            # No value to diff: nobody behind this version can be told exactly what changed.
            self._members.pop(namespace, None)
            if self._unknown is not None:
                self._unknown.add(namespace)
            log.floor = max(log.floor, change.version)
            return []
        after = members_of(change.record.value)
        unknown = self._unknown
        if (unknown is None and namespace not in self._members) or (unknown and namespace in unknown):
            # What it changed from is not known: the same as above, and known from here on.
            self._members[namespace] = after
            if unknown:
                unknown.discard(namespace)
            log.floor = max(log.floor, change.version)
            return []
        before = self._members.get(namespace, [])
        self._members[namespace] = after
        kept = set(after)
        gone = [url for url in before if url not in kept]
        had = set(before)
        joined = [url for url in after if url not in had]
        return [WatchedChange("delete", ENCODER_URLS, change.version, url=url) for url in gone] + [
            WatchedChange("put", ENCODER_URLS, change.version, url=url) for url in joined
        ]

    def _told(self, namespace: str, marked: str, version: int) -> WatchedChange:
        """A change that names the URL it added (``+URL``) or removed (``-URL``): another replica's, over Redis."""
        url, joined = marked[1:], marked.startswith("+")
        unknown = self._unknown
        if not ((unknown is None and namespace not in self._members) or (unknown and namespace in unknown)):
            # Known before it, so known after: the next change that comes with its record is diffed exactly.
            members = [member for member in self._members.get(namespace, []) if member != url]
            self._members[namespace] = [*members, url] if joined else members
        return WatchedChange("put" if joined else "delete", ENCODER_URLS, version, url=url)
