"""``--store URL`` to a store, and a URL fit for a log line.

The schemes: ``memory:`` (the default), ``file:PATH`` (the journal),
``redis://[user:password@]host[:port][/db]``, ``rediss://...`` (TLS),
``unix:///path/redis.sock[?db=N]``, and ``redis+sentinel://`` or
``rediss+sentinel://`` (the primary Redis Sentinel names, ``sentinel_url``),
``etcd://[user:password@]host:port[,host:port...][?prefix=NAME]`` and ``etcds://`` (TLS: an etcd
cluster, ``etcd_url``). A URL that cannot be served, whatever the
reason (malformed, an unknown scheme, its extra not installed), is a
:class:`ValueError` with a one-line message: the CLI turns it into exit status 2.
"""

from __future__ import annotations

from importlib.util import find_spec
from urllib.parse import parse_qs, urlsplit

from .._names import check_name
from .etcd_url import ETCD_SCHEMES, parse_etcd_url
from .interface import Store
from .limits import StoreLimits
from .memory import MemoryStore
from .redacted import describe
from .sentinel_url import SENTINEL_SCHEMES, parse_sentinel_url

__all__ = ["check_store_url", "describe", "is_redis_url", "open_store"]

REDIS_SCHEMES = ("redis", "rediss", "unix", *SENTINEL_SCHEMES)
_SCHEMES = "memory:, file:PATH, redis://, rediss://, unix://, redis+sentinel://, rediss+sentinel://, etcd:// or etcds://"


def check_store_url(url: str) -> None:
    """Raise the one-line ``ValueError`` of :func:`open_store` for a URL that names no store; open nothing.

    The config calls it, so a malformed URL, or one whose extra is not installed, fails at start like a
    taken port (before serving: not a traceback from the app's start-up when the store is opened).
    """
    scheme, _ = _parse(url)
    extra, modules = _EXTRAS.get(scheme, ("", ()))
    if any(_missing(module) for module in modules):
        raise ValueError(_needs(url, extra))


_EXTRAS = {
    **{scheme: ("redis", ("redis",)) for scheme in REDIS_SCHEMES},
    **{scheme: ("etcd", ("aetcd", "grpc")) for scheme in ETCD_SCHEMES},
}
"""The extra each scheme's store needs, and the modules it installs (looked for, not imported: the
import is the store's, when it is opened)."""


def _missing(module: str) -> bool:
    try:
        return find_spec(module) is None
    except (ImportError, ValueError):
        return True


def _needs(url: str, extra: str) -> str:
    return f"The store URL {describe(url)} needs the {extra} extra: pip install 'aiobootstrap[{extra}]'."


def is_redis_url(url: str) -> bool:
    """True when ``url`` names a Redis store (plain, TLS, Unix socket or Sentinel)."""
    return url.partition(":")[0].lower() in REDIS_SCHEMES


def _parse(url: str) -> tuple[str, str]:
    """``url``'s scheme and what follows its colon, checked."""
    scheme, _, rest = url.partition(":")
    scheme = scheme.lower()
    if not _ or not scheme:
        raise ValueError(f"The store URL {url!r} has no scheme; use {_SCHEMES}.")
    if scheme == "memory":
        if rest not in ("", "//"):
            raise ValueError(f"The store URL {url!r} is malformed: memory: takes nothing after the colon.")
    elif scheme == "file":
        if not (rest[2:] if rest.startswith("//") else rest):
            raise ValueError(f"The store URL {url!r} names no file; use file:PATH.")
    elif scheme in SENTINEL_SCHEMES:
        parse_sentinel_url(url)
    elif scheme in REDIS_SCHEMES:
        _check_redis_url(url)
    elif scheme in ETCD_SCHEMES:
        parse_etcd_url(url)
    else:
        raise ValueError(f"The store URL {describe(url)} has an unknown scheme {scheme!r}; use {_SCHEMES}.")
    return scheme, rest


def open_store(
    url: str, *, prefix: str = "aiobootstrap", limits: StoreLimits | None = None, min_replicas: int = 0
) -> Store:
    """The store ``url`` names, not yet opened (call :meth:`Store.open`).

    ``min_replicas``: how many Redis replicas must hold a write before it is
    acknowledged (``--store-min-replicas``); only a Redis store can promise it.
    """
    limits = limits if limits is not None else StoreLimits()
    scheme, rest = _parse(url)
    if min_replicas and scheme not in REDIS_SCHEMES:
        raise ValueError(f"--store-min-replicas needs a Redis store, not {describe(url)}.")
    if scheme == "memory":
        return MemoryStore(limits)
    if scheme == "file":
        from .file import FileStore

        return FileStore(rest[2:] if rest.startswith("//") else rest, limits)
    if scheme in REDIS_SCHEMES:
        check_name(prefix, "store prefix")
        from .redis import RedisStore, redis_missing

        if redis_missing():
            raise ValueError(_needs(url, "redis"))
        return RedisStore(url, prefix=prefix, limits=limits, min_replicas=min_replicas)
    if scheme in ETCD_SCHEMES:
        check_name(prefix, "store prefix")
        from .etcd import EtcdStore, etcd_missing

        if etcd_missing():
            raise ValueError(_needs(url, "etcd"))
        return EtcdStore(url, prefix=prefix, limits=limits)
    raise AssertionError(f"unreachable: {scheme}")


def _check_redis_url(url: str) -> None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"The store URL {describe(url)} is malformed: {exc}.") from exc
    if parts.scheme == "unix":
        if not parts.path or (parts.netloc not in ("", "localhost") and "@" not in parts.netloc):
            raise ValueError(
                f"The store URL {describe(url)} is malformed: use unix:///path/redis.sock[?db=N]."
            )
        db_values = parse_qs(parts.query).get("db", ["0"])
        db = db_values[-1]
    else:
        if not parts.hostname:
            raise ValueError(
                f"The store URL {describe(url)} names no host: use {parts.scheme}://host[:port][/db]."
            )
        if port is not None and port == 0:
            raise ValueError(f"The store URL {describe(url)} has port 0.")
        db = parts.path.strip("/") or "0"
    if not db.isdigit():
        raise ValueError(f"The store URL {describe(url)} names database {db!r}; a database is a number.")
