"""How ``GET /watch`` shows a change of the encoder URL list: the URL that joined or left it.

The list is a set record (``keys``): the store changes it one member at a
time and tells each change with its member (``Change.member``), which the
history keeps (``core.history.LoggedChange``). A watcher is told
``{"op", "kind": "encoder_urls", "url", "version"}``: ``put``, the URL
joined the list; ``delete``, it left it (unregistered, evicted by the
probes, or its lease ended). The evicted set (role ``evicted``: still probed,
not listed) is shown to nobody, and neither is a change that names no URL.
"""

from __future__ import annotations

from typing import Any

from ...._names import DEFAULT_ROLE
from ....core.history import LoggedChange

__all__ = ["describe_url_change"]


def describe_url_change(change: LoggedChange) -> list[dict[str, Any]]:
    """What ``/watch`` says of ``change``: the URL it added or removed; nothing of the evicted set."""
    url = change.member
    if url is None or change.role != DEFAULT_ROLE:
        return []
    return [{"op": change.op, "kind": change.kind, "url": url, "version": change.version}]
