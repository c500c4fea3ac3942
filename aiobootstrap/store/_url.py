"""From a ``--store`` URL to a store."""

from __future__ import annotations

from ._base import Store, StoreLimits
from ._memory import MemoryStore

__all__ = ["open_store"]


def open_store(url: str, *, prefix: str, limits: StoreLimits) -> Store:
    """The store ``url`` names (not yet opened); ``ValueError`` with one line when it names none."""
    scheme, colon, rest = url.partition(":")
    if not colon:
        raise ValueError(f"the store {url!r} is not a URL: use memory:, file:PATH or redis://HOST:PORT")
    if scheme == "memory" and not rest:
        return MemoryStore(limits)
    if scheme == "file":
        if not rest.strip():
            raise ValueError("the store file: needs a path, as in file:/var/lib/aiobootstrap/state.journal")
        from ._file import FileStore

        return FileStore(rest, limits)
    raise ValueError(
        f"the store {url!r} has an unknown scheme: use memory:, file:PATH, redis://, rediss:// or unix://"
    )
