"""From a ``--store`` URL to a store.

``check_store_url`` validates a URL without opening anything (the config calls
it, so a malformed URL fails at start like a taken port); ``open_store`` makes
the store it names, not yet opened.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from ._base import Store, StoreLimits
from ._memory import MemoryStore

__all__ = ["check_store_url", "open_store"]

_SCHEMES = "memory:, file:PATH, redis://HOST[:PORT][/DB], rediss://... or unix:///PATH[?db=N]"
_REDIS_SCHEMES = ("redis", "rediss", "unix")


def check_store_url(url: str) -> None:
    """Raise ``ValueError`` with one line when ``url`` names no store."""
    scheme, colon, rest = url.partition(":")
    if not colon:
        raise ValueError(f"the store {url!r} is not a URL: use {_SCHEMES}")
    if scheme == "memory":
        if rest:
            raise ValueError(f"the store {url!r}: memory: takes nothing after the colon")
        return
    if scheme == "file":
        if not rest.strip():
            raise ValueError("the store file: needs a path, as in file:/var/lib/aiobootstrap/state.journal")
        return
    if scheme not in _REDIS_SCHEMES:
        raise ValueError(f"the store {url!r} has an unknown scheme {scheme!r}: use {_SCHEMES}")
    _check_redis_url(url, scheme)


def _check_redis_url(url: str, scheme: str) -> None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"the store URL {_redacted(url)} is malformed: {exc}") from None
    query = parse_qs(parts.query)
    if scheme == "unix":
        if not parts.path:
            raise ValueError("the store unix:// needs the socket's path, as in unix:///run/redis/redis.sock")
        db = query.get("db", ["0"])[0]
    else:
        if not parts.hostname:
            raise ValueError(f"the store URL {_redacted(url)} names no host, as in redis://10.0.0.5:6379/0")
        if port == 0:
            raise ValueError(f"the store URL {_redacted(url)} names port 0")
        db = parts.path.lstrip("/") or query.get("db", ["0"])[0]
    if not (db.isascii() and db.isdigit()):
        raise ValueError(f"the store URL {_redacted(url)} names database {db!r}: it must be a number")


def _redacted(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def open_store(url: str, *, prefix: str, limits: StoreLimits) -> Store:
    """The store ``url`` names (not yet opened); ``ValueError`` with one line when it names none."""
    check_store_url(url)
    scheme, _, rest = url.partition(":")
    if scheme == "memory":
        return MemoryStore(limits)
    if scheme == "file":
        from ._file import FileStore

        return FileStore(rest, limits)
    from ._redis import RedisStore

    return RedisStore(url, prefix=prefix, limits=limits)
