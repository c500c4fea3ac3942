"""The open file limit, and what the server fits under it.

Every parked wait and every connection holds a descriptor. Past the limit the
server cannot ``accept()`` at all, and a registration is refused along with
everything else; so the defaults for parked waits and connections are derived
from the limit here, each leaving a reserve, and the limit is raised at start.
"""

from __future__ import annotations

import logging

__all__ = [
    "CONNECTION_FD_RESERVE",
    "WAITER_FD_RESERVE",
    "connection_limit",
    "open_file_limit",
    "raise_open_file_limit",
    "waiter_limit",
]

log = logging.getLogger("aiobootstrap")

WAITER_FD_RESERVE = 1024
"""Open files kept free of parked waits: registrations, health checks, the state file, logs."""
CONNECTION_FD_RESERVE = 128
"""Open files the default connection cap keeps free of connections: the listening sockets, the
store, the state file, the log, and the connections the loop accepts in one burst before any is shed."""


def open_file_limit() -> int | None:
    """The soft RLIMIT_NOFILE; ``None`` when unlimited or unknown on this platform."""
    try:
        import resource
    except ImportError:  # not on this platform: no limit to fit
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def raise_open_file_limit() -> None:
    """Raise the soft RLIMIT_NOFILE to the hard one: each parked wait holds a socket."""
    try:
        import resource
    except ImportError:  # not on this platform: nothing to raise
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open file limit from %d to %d: %s", soft, target, exc)
    else:
        log.debug("raised the open file limit from %d to %d", soft, target)


def waiter_limit(asked: int | None, default: int) -> int:
    """``asked``, or ``default`` lowered to leave :data:`WAITER_FD_RESERVE` open files for everything else.

    Better that extra waiters get a 503 and retry than that the table fills.
    An ``asked`` beyond the room is kept, with a warning.
    """
    limit = open_file_limit()
    room = None if limit is None else max(1, limit - WAITER_FD_RESERVE)
    if asked is not None:
        if room is not None and asked > room:
            log.warning(
                "--max-waiters %d is more than the open file limit %d leaves room for (%d)",
                asked,
                limit,
                room,
            )
        return asked
    if room is not None and room < default:
        log.debug("max waiters lowered to %d to fit the open file limit of %d", room, limit)
        return room
    return default


def connection_limit(asked: int | None) -> int | None:
    """``asked``, warned about when the open file limit leaves no room for it; else the derived default.

    The default is the open file limit less :data:`CONNECTION_FD_RESERVE` (half
    the limit when it is tiny); ``None`` (no cap) when the limit is unknown.
    """
    limit = open_file_limit()
    room = None if limit is None else max(1, limit // 2, limit - CONNECTION_FD_RESERVE)
    if asked is None:
        return room
    if room is not None and asked > room:
        log.warning(
            "--max-connections %d is more than the open file limit leaves room for (%d): "
            "past that, new connections fail before any idle one can be shed",
            asked,
            room,
        )
    return asked
