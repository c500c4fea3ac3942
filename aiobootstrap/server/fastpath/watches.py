"""The watches' fast path: a change's reply encoded once per group of watchers, written below ``web.Response``.

Theory of operation
-------------------
A thousand watchers of a namespace, told of one registration, each resumed
their task, filtered the history, encoded the same reply and answered it
through a ``web.Response`` of their own: the k-th first byte waited for k of
those. Yet what a watcher is told depends only on its filter and its
``after``, and most watchers share both.

So a watch parked on the history announces itself (:meth:`WatchReplies.expect`,
a :class:`PendingWatch`) in a *watch group*: the watches of one namespace with the
same filter and ``after``. :meth:`WatchReplies.namespace_changed`, subscribed to the
history's changed namespaces, hears each namespace a change touched just
before its watchers are woken,
and one loop callback (after the step that made the change, so the
registration's own reply goes first) answers every group that
:meth:`History.ready` has changes for:

- a long-poll's ``200`` is encoded once per group, its bytes made once per
  variant (HTTP/1.0 or 1.1, keep-alive, HEAD) with the head aiohttp writes
  (``heads``), and written with one ``transport.write`` per watcher; its
  handler then returns :meth:`WatchReplies.written`, a
  ``prebuilt.PrebuiltReply`` that was sent already;
- a stream's events are framed once per change (for every group in the
  callback), joined once per group, put in a chunk once (HTTP/1.1's chunked
  encoding, which the stream uses) and written to every stream of the
  group; the stream's task then skips the changes it was sent
  (:attr:`PendingWatch.upto`).

The groups live as long as a watch is in them: nothing here is a cache but
the events framed for one answering pass (keyed by the change, dropped as
the pass ends) and each group's bytes per variant (made and written in one
pass).

A long-poll that asked ``&waits=N`` / ``&findings=M`` (the page's) is in a
group of the counts it was told too. Its reply says the counts now, and it is
also answered when they move: :meth:`WatchReplies.count_moved` is
subscribed to the steps of the registry's ``Parking.wait_changes`` (a wait parked or
gone) and of the prober's ``EncoderHealth.probe_changes``, and one loop callback
answers every such group told counts that are no longer true, with the
changes it has (often none), then ends each watch's wait (``PendingWatch`` is
the history's ``WaitEnd``).
So the page's renewal parks as a plain watch does: no task of its own.

A group with nothing new (its filter matched none of the changes) stays
parked, and remembers how far it has looked (``_WatchGroup.seen``): the next
change is matched against the changes above it only, as a watch's own task
does (``History.since``), so a change costs each group of its namespace its
new changes, not every change since the group's ``after`` (5,000 watchers,
each of another ``ranks=``, had made each registration cost groups times
history). A watch settled (:meth:`WatchReplies.settle`) is never written to,
nor is a client gone. Anything else (a ``410``, a stop, a wait running out, a
watch answered without waiting) takes the handler's own way. The fast way is
taken only for a request :attr:`WatchReplies.eligible` allows, and for a
stream only when it is not compressed. The subscriptions are made in one
place, the app's start-up (``server/app.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Sequence

from aiohttp import web

from ...core.history import History, LoggedChange, Match, WaitEnd
from ...core.history.filters import Parked, every
from ...core.parking import Parking
from ...core.tally import Tally
from ..change_words import ChangeWords
from . import heads
from .eligible import Eligibility
from .prebuilt import PendingReply, PrebuiltReply, Stamp

__all__ = ["WATCH_REPLIES", "PendingWatch", "WatchReplies"]

log = logging.getLogger("aiobootstrap")

GroupKey = tuple[Hashable, int, bool, int | None, int | None]
"""A group: the filter's parameters, ``after``, whether it streams, and the waits and findings it was
told (``None``: not asked)."""


class PendingWatch(WaitEnd, PendingReply):
    """A parked watch that a change may answer before its handler resumes (see :meth:`WatchReplies.expect`):
    written once at most, never once settled (``prebuilt.PendingReply``); ended (:meth:`WaitEnd.end`) when
    answered for its counts."""

    __slots__ = ("group", "length", "request", "response", "sent", "settled", "upto")

    def __init__(self, request: web.Request, response: web.StreamResponse | None, group: _WatchGroup) -> None:
        super().__init__()
        self.request = request
        self.settled = False
        self.sent = 0
        self.length = -1
        self.response = response
        """The stream's prepared response; ``None`` for a long-poll."""
        self.group = group
        self.upto: int | None = None
        """The version the written reply goes up to (its ``version``); ``None`` until written."""


class _WatchGroup:
    __slots__ = ("after", "findings", "key", "match", "namespace", "seen", "waits", "watches")

    def __init__(self, namespace: str, key: GroupKey, match: Match | None) -> None:
        self.namespace = namespace
        self.key = key
        _, self.after, _, self.waits, self.findings = key
        self.match = match
        self.watches: dict[PendingWatch, bool] = {}
        self.seen = self.after
        """The version up to which the history holds no change for the group: the next pass matches only
        the changes above it (a change costs each group its new changes, not all since ``after``)."""


class WatchReplies:
    """The parked watches of every namespace, by group, and the bytes a change answers them with."""

    def __init__(
        self,
        history: History,
        parking: Parking,
        stamp: Stamp,
        eligible: Eligibility,
        *,
        probe_changes: Tally | None = None,
        words: ChangeWords | None = None,
    ) -> None:
        """``stamp``: the app's one (``GetReplies.stamp``); ``eligible``: its one rule (``eligible.ELIGIBILITY``);
        ``probe_changes``: the prober's, when something probes."""
        self.eligible = eligible
        """Asked by the responder before it announces a watch: ``replies.eligible(request)``."""
        self._history = history
        self._parking = parking
        self._probe_changes = probe_changes
        self._words = ChangeWords() if words is None else words
        """How the changes are shown (``change_words``: each kind's words, or the generic form)."""
        self._groups: dict[str, dict[GroupKey, _WatchGroup]] = {}
        self._by_filter: dict[str, Parked[_WatchGroup]] = {}
        """Each namespace's groups by filter: a change answers the groups it may concern (``filters``)."""
        self._fresh: dict[str, dict[_WatchGroup, None]] = {}
        """Each namespace's groups made since its last pass, each looked at whole at the next."""
        self._passed: dict[str, int] = {}
        """The version each namespace's last pass reached: the next matches only the changes above it."""
        self._due: set[str] = set()
        self._counting: dict[_WatchGroup, None] = {}
        """The groups that asked for waits or findings, answered when those move."""
        self._counts_due = False
        self._stamp = stamp
        self._stamp_lines = b""

    def expect(
        self,
        request: web.Request,
        namespace: str,
        after: int,
        filter_key: Hashable,
        match: Match | None,
        stream: web.StreamResponse | None = None,
        *,
        waits: int | None = None,
        findings: int | None = None,
    ) -> PendingWatch:
        """Announce a watch of ``namespace`` after ``after`` (a stream's ``stream``; a long-poll's ``waits``
        and ``findings``, the counts it was told); settle it when its wait is over."""
        groups = self._groups.get(namespace)
        if groups is None:
            groups = self._groups[namespace] = {}
        key = (filter_key, after, stream is not None, waits, findings)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _WatchGroup(namespace, key, match)
            # Its handler reads the log next, before anything else runs, when the namespace has one: it answers
            # a change of the group's there (and settles), or parks having seen up to the log's newest. So
            # the group's first look starts there, not at ``after`` (3,000 new groups at ``after=0`` each
            # matched the namespace's whole log once, a second's stall: issue 41, item 11).
            latest = self._history.latest(namespace)
            if latest is not None:
                group.seen = max(group.seen, latest)
            self._by_filter.setdefault(namespace, Parked()).add(group, every if match is None else match)
            self._fresh.setdefault(namespace, {})[group] = None
            if waits is not None or findings is not None:
                self._counting[group] = None
        pending = PendingWatch(request, stream, group)
        group.watches[pending] = True
        return pending

    def settle(self, pending: PendingWatch, namespace: str) -> None:
        """The watch's wait is over: nothing more is written for it."""
        pending.settled = True
        group = pending.group
        if group.watches.pop(pending, False) and not group.watches:
            self._drop(group)

    def _drop(self, group: _WatchGroup) -> None:
        self._counting.pop(group, None)
        namespace = group.namespace
        groups = self._groups.get(namespace)
        if groups is not None and groups.get(group.key) is group:
            del groups[group.key]
            self._by_filter[namespace].remove(group)
            self._fresh.get(namespace, {}).pop(group, None)
            if not groups:
                del self._groups[namespace], self._by_filter[namespace]
                self._fresh.pop(namespace, None)
                self._passed.pop(namespace, None)

    def namespace_changed(self, namespace: str) -> None:
        """Subscribed to the history's changed namespaces: answer the groups of ``namespace`` one loop turn later."""
        if namespace in self._groups and namespace not in self._due:
            self._due.add(namespace)
            asyncio.get_running_loop().call_soon(self._answer, namespace)

    def count_moved(self) -> None:
        """Subscribed to the steps of ``Parking.wait_changes`` and ``EncoderHealth.probe_changes``: answer the groups told other counts, one
        loop turn later (so many moves in one step cost one pass)."""
        if self._counting and not self._counts_due:
            self._counts_due = True
            asyncio.get_running_loop().call_soon(self._answer_counts)

    def _answer(self, namespace: str) -> None:
        self._due.discard(namespace)
        groups = self._groups.get(namespace)
        if not groups:
            return
        self._stamp_lines = self._stamp.lines()
        frames: dict[int, bytes] = {}  # id(change) -> its event: framed once for every group
        for group in self._concerned(namespace, groups):
            key = group.key
            if groups.get(key) is not group:
                continue  # answered and dropped meanwhile
            now = self._history.now(namespace, group.after, group.match, group.seen)
            if now is None:
                continue  # gone past it, or stopping: its handlers answer (a 410, a 503)
            changes, version = now
            if not changes:
                group.seen = version  # none of the new changes is the group's: it stays parked
                continue
            try:
                if key[2]:
                    self._stream(group, changes, version, frames)
                else:
                    self._long_poll(group, changes, version)
            except Exception:
                log.exception("A pending watch reply failed")  # each watch's own task still answers it
            self._drop(group)

    def _concerned(self, namespace: str, groups: dict[GroupKey, _WatchGroup]) -> list[_WatchGroup]:
        """The groups a pass looks at: those whose filter one of the changes since the last pass matches,
        and those made since; every group when the last pass is not known or no longer in the log.

        A group no change concerns is not looked at (3,000 groups of filters of their own cost every change
        3,000 looks before: issue 41, item 11); its ``seen`` stays, and a look scans from it.
        """
        history, passed = self._history, self._passed.get(namespace)
        latest = history.latest(namespace)
        if latest is not None:
            self._passed[namespace] = latest
        fresh = self._fresh.pop(namespace, None) or {}
        scan = None if passed is None else history.now(namespace, passed, None)
        if scan is None or scan[1] != latest:  # no pass yet, gone past it, or more than one reply's worth
            return list(groups.values())
        assert passed is not None
        concerned = dict.fromkeys(self._by_filter[namespace].matching(scan[0]))
        for group in concerned:
            if group not in fresh:  # it was here at the last pass: no change up to it was its
                group.seen = max(group.seen, passed)
        concerned.update(fresh)
        return list(concerned)

    def _answer_counts(self) -> None:
        self._counts_due = False
        moves, tally = self._parking.wait_changes.count, self._probe_changes
        findings = None if tally is None else tally.count
        self._stamp_lines = self._stamp.lines()
        for group in list(self._counting):
            seen_waits, seen_findings = group.waits, group.findings
            if (seen_waits is None or seen_waits == moves) and (
                seen_findings is None or findings is None or seen_findings == findings
            ):
                continue
            now = self._history.now(group.namespace, group.after, group.match, group.seen)
            if now is None:
                continue  # gone past it, or stopping: its handler answers (a 410, a 503)
            try:
                self._long_poll(group, *now)
            except Exception:
                log.exception("A pending watch reply failed")
            self._drop(group)

    def _long_poll(self, group: _WatchGroup, changes: Sequence[LoggedChange], version: int) -> None:
        tally = self._probe_changes
        body = self._words.reply(
            changes,
            version,
            waits=None if group.waits is None else self._parking.wait_changes.count,
            findings=None if group.findings is None or tally is None else tally.count,
        )
        made: dict[int, bytes] = {}
        for pending in group.watches:
            # Read now, not at announcing: its first reading fills the request's cache of properties.
            variant = heads.variant(pending.request)
            data = made.get(variant)
            if data is None:
                head = heads.head(heads.OK, heads.JSON_LINE, len(body), self._stamp_lines, variant)
                data = made[variant] = head if variant & heads.HEAD else head + body
            _send(pending, data, len(body), version)
        for pending in group.watches:
            pending.end()  # answered: no change may be coming to wake it

    def _stream(
        self,
        group: _WatchGroup,
        changes: Sequence[LoggedChange],
        version: int,
        frames: dict[int, bytes],
    ) -> None:
        events = []
        for change in changes:
            event = frames.get(id(change))
            if event is None:
                event = frames[id(change)] = self._words.events(change)
            events.append(event)
        data = b"".join(events)
        chunk = b"%x\r\n%b\r\n" % (len(data), data)
        for pending in group.watches:
            response = pending.response
            if response is None or response.compression:
                continue  # its own task writes through the response's compressor
            # The writer chunks what aiohttp did not know the length of (HTTP/1.1); the header says so.
            chunked = response.headers.get("Transfer-Encoding") == "chunked"
            _send(pending, chunk if chunked else data, len(data), version)

    def written(self, request: web.Request, pending: PendingWatch) -> PrebuiltReply:
        """The reply a long-poll's handler returns when its ``200`` was written already (``pending.upto``)."""
        return PrebuiltReply(request, self._stamp, b"", pending.length, sent=pending.sent)


def _send(pending: PendingWatch, data: bytes, length: int, version: int) -> None:
    if pending.write_once(data, length):
        pending.upto = version


WATCH_REPLIES = web.AppKey("watch_replies", WatchReplies)
"""The app's parked watches, by group, and their pre-built replies."""
