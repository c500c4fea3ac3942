"""``BootstrapClient.watch``: every change of a namespace, followed across reconnects, replicas and restarts.

Theory of operation
-------------------
The iterator long-polls ``GET /watch`` from the version it has reached,
through the transport (which moves to the next replica and backs off while
none answers, for as long as it takes), and yields each change in order.
Each reply's ``version`` is the next ``after``: no change is yielded twice,
none is skipped.

It also keeps what it has given the caller: every key (kind, role and rank,
or an encoder URL) whose last change it yielded was a ``put``. When the
server can no longer say what happened since (a ``410``: the history does
not reach back that far), or the registry is another incarnation (a new
``X-Aiobootstrap-Boot``: an in-memory server restarted, its versions begun
again; the iterator names the boot id its position came from, ``&boot=``,
so a restarted server says so at once, even to a poll that would park), it
re-reads the listing (each kind's records of the roles asked
for, or of ``target`` and every role it has seen; the encoder list) and
yields the difference: a ``put`` for each record present that it has not
yielded at that version, then a ``delete`` for each key it had given a put of that
is gone (at the listing's version), and goes on from the listing's version.
A caller that applies every change it is given holds the listing as it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from .._names import DEFAULT_ROLE, ENCODER_URLS, RANK_KINDS
from .._ranks import RankSet
from ..wire.params import encoder_list_query, listing_query
from ..wire.results import decode_encoder_urls, decode_listing
from ..wire.routes import ENCODER_LIST_PATH, RANKS_PATH
from ..wire.watch import WATCH_PATH, WatchedChange, decode_watch, watch_query
from .retry import Deadline
from .transport import Reply, Transport

__all__ = ["watch"]

_Known = tuple[str, str | None, int | None, str | None]
"""What a change is about: kind, role, rank, url."""


def _about(change: WatchedChange) -> _Known:
    return (change.kind, change.role, change.rank, change.url)


class _Follower:
    """One watch's position and what it has given its caller."""

    def __init__(
        self, transport: Transport, after: int, kind: str | None, role: str | None, ranks: RankSet | None
    ) -> None:
        self.transport = transport
        self.after = after
        self.kind, self.role, self.ranks = kind, role, ranks
        self.known: dict[_Known, int] = {}
        """Each key whose last change yielded was a put, and that change's version."""
        self.boot: str | None = None

    def yielded(self, change: WatchedChange) -> WatchedChange:
        """``change``, remembered as given to the caller (a put known, a delete forgotten)."""
        if change.op == "put":
            self.known[_about(change)] = change.version
        else:
            self.known.pop(_about(change), None)
        return change

    async def poll(self) -> Reply:
        """The next reply with news: changes, a moved version, or anything but a ``200``.

        The transport's long-poll: asked again when the server's wait ran out with nothing, and
        backed off against a server that does not wait (``--max-wait 0``).
        """

        def query(wait: float) -> dict[str, str]:
            return watch_query(
                self.after, wait, kind=self.kind, role=self.role, ranks=self.ranks, boot=self.boot
            )

        def news(path: str, reply: Reply) -> bool:
            if reply.status != 200:
                return True
            decoded = decode_watch(reply.body)
            return bool(decoded.changes) or decoded.version != self.after

        return await self.transport.long_poll(WATCH_PATH, query, Deadline(None), news)

    async def relist(self) -> list[WatchedChange]:
        """The difference between what the caller was given and the listing; the position moves to it."""
        present: dict[_Known, int] = {}
        versions: list[int] = []
        kinds = RANK_KINDS if self.kind is None else [self.kind] if self.kind != ENCODER_URLS else []
        roles = {self.role} if self.role is not None else {DEFAULT_ROLE} | {k[1] for k in self.known if k[1]}
        for kind in kinds:
            for role in sorted(roles):
                listing = await self._get(RANKS_PATH, listing_query(kind, role))
                decoded = decode_listing(listing.body)
                versions.append(decoded.version)
                for item in decoded.ranks:
                    if self.ranks is None or item.rank in self.ranks:
                        present[(kind, role, item.rank, None)] = item.version
        if self.kind in (None, ENCODER_URLS) and self.role is None and self.ranks is None:
            urls = decode_encoder_urls((await self._get(ENCODER_LIST_PATH, encoder_list_query(0, 0.0))).body)
            versions.append(urls.version)
            present.update(((ENCODER_URLS, None, None, url), urls.version) for url in urls.urls)
        listed = min(versions, default=0)
        changes = [
            WatchedChange("put", key[0], version, role=key[1], rank=key[2], url=key[3])
            for key, version in sorted(present.items(), key=lambda item: item[1])
            if self.known.get(key) != version
        ]
        changes += [
            WatchedChange("delete", key[0], listed, role=key[1], rank=key[2], url=key[3])
            for key in self.known
            if key not in present
        ]
        # The lowest version read: changes after it that a listing already showed come again, harmlessly.
        self.after = listed
        return [self.yielded(change) for change in changes]

    async def _get(self, path: str, query: dict[str, str]) -> Reply:
        reply = await self.transport.call(
            "GET", path, Deadline(None), params=query or None, read_timeout=60.0
        )
        if reply.status != 200:
            raise self.transport.error(reply.status, path, reply.body)
        self.boot = reply.boot
        return reply


async def watch(
    transport: Transport,
    after: int,
    kind: str | None,
    role: str | None,
    ranks: Iterable[int] | None,
) -> AsyncIterator[WatchedChange]:
    """The changes after ``after`` for ever (see the module's notes)."""
    rank_set = None if ranks is None else ranks if isinstance(ranks, RankSet) else RankSet.from_ranks(ranks)
    follower = _Follower(transport, after, kind, role, rank_set)
    while True:
        reply = await follower.poll()
        restarted = follower.boot is not None and reply.boot is not None and reply.boot != follower.boot
        if reply.boot is not None:
            follower.boot = reply.boot
        if restarted or reply.status == 410:
            for change in await follower.relist():
                yield change
            continue
        if reply.status != 200:
            raise transport.error(reply.status, WATCH_PATH, reply.body)
        decoded = decode_watch(reply.body)
        follower.after = decoded.version
        for change in decoded.changes:
            yield follower.yielded(change)
