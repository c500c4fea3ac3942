"""``redis+sentinel://`` and ``rediss+sentinel://`` store URLs, read and checked.

``redis+sentinel://[user:password@]host:port[,host:port...]/MASTER[?db=N]``
names the Sentinels to ask (a port left out is Sentinel's 26379) and the
master name they monitor; the credentials and ``db`` are the Redis
primary's (and its replicas'), not the Sentinels'. Sentinels that want a
password of their own (``requirepass`` in their config, or an ACL user) get
it from ``sentinel_password=`` (and ``sentinel_username=``) in the query:
the URL is the one secret to hand over (``AIOBOOTSTRAP_STORE`` keeps it out
of process listings), and :func:`~aiobootstrap.store.redacted.describe`
hides both passwords. ``rediss+sentinel://`` speaks TLS to the Sentinels and
the Redis nodes alike, and takes the ``ssl_*`` query parameters a
``rediss://`` URL takes.

A leaf of the store: :mod:`~aiobootstrap.store.url` checks a URL with it
at start, and the Redis connection reads one with it when it connects, so
both agree on what the URL says. Everything wrong is a :class:`ValueError`
of one line, for exit status 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlencode

from .redacted import describe

__all__ = ["SENTINEL_SCHEMES", "SentinelURL", "is_sentinel_url", "parse_sentinel_url"]

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
SENTINEL_PORT = 26379
"""The port of a Sentinel whose URL names none: Sentinel's own default."""

_FORM = "redis+sentinel://[user:password@]host:port[,host:port...]/MASTER[?db=N]"
_CREDENTIALS = ("sentinel_username", "sentinel_password")


@dataclass(frozen=True, slots=True)
class SentinelURL:
    """What a Sentinel store URL says."""

    sentinels: tuple[tuple[str, int], ...]
    """The Sentinels to ask, in the URL's order."""
    master: str
    """The name the Sentinels monitor the primary under."""
    node_url: str
    """A plain ``redis://`` (or ``rediss://``) URL without a host, holding the primary's credentials,
    database and TLS options: redis-py reads it as it reads any URL."""
    tls: bool
    sentinel_username: str | None = field(default=None, repr=False)
    """The Sentinels' own user (``sentinel_username=``); ``None``: the default user."""
    sentinel_password: str | None = field(default=None, repr=False)
    """The Sentinels' own password (``sentinel_password=``); ``None``: they are asked without one."""


def is_sentinel_url(url: str) -> bool:
    return url.partition(":")[0].lower() in SENTINEL_SCHEMES


def parse_sentinel_url(url: str) -> SentinelURL:
    """What ``url`` says; a one-line :class:`ValueError` when it is not a Sentinel store URL."""
    shown = describe(url)
    scheme, separator, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme not in SENTINEL_SCHEMES or not separator:
        raise ValueError(f"The store URL {shown} is malformed: use {_FORM}.")
    if "#" in rest:
        raise ValueError(f"The store URL {shown} has a fragment (#...); use {_FORM}.")
    authority, _, tail = rest.partition("/")
    path, _, query = tail.partition("?")
    userinfo, at, hosts = authority.rpartition("@")
    if not hosts:
        raise ValueError(f"The store URL {shown} names no Sentinel: use {_FORM}.")
    sentinels = tuple(_host_port(part, shown) for part in hosts.split(","))
    master = unquote(path)
    if not master:
        raise ValueError(
            f"The store URL {shown} names no master: end it with /MASTER, the name Sentinel monitors."
        )
    if "/" in master:
        raise ValueError(f"The store URL {shown} names the master {master!r}; a master name has no '/'.")
    tls = scheme == "rediss+sentinel"
    db = "0"
    options: list[tuple[str, str]] = []
    credentials_of_sentinels: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "db":
            db = value
        elif name in _CREDENTIALS:
            if name in credentials_of_sentinels:
                raise ValueError(f"The store URL {shown} gives {name} twice; give it once.")
            if not value:
                raise ValueError(f"The store URL {shown} has an empty {name}; leave it out, or give one.")
            credentials_of_sentinels[name] = value
        elif tls and name.startswith("ssl_"):
            options.append((name, value))
        else:
            allowed = "db, sentinel_username, sentinel_password" + (" and the ssl_* options" if tls else "")
            raise ValueError(f"The store URL {shown} has the parameter {name!r}; it takes {allowed}.")
    if not db.isdigit():
        raise ValueError(f"The store URL {shown} names database {db!r}; a database is a number.")
    if (
        "sentinel_username" in credentials_of_sentinels
        and "sentinel_password" not in credentials_of_sentinels
    ):
        raise ValueError(
            f"The store URL {shown} gives sentinel_username without sentinel_password; a user needs its password."
        )
    credentials = f"{userinfo}@" if at else ""
    node_url = f"{'rediss' if tls else 'redis'}://{credentials}sentinel.named/{db}"
    if options:
        node_url += f"?{urlencode(options)}"
    return SentinelURL(
        sentinels,
        master,
        node_url,
        tls,
        sentinel_username=credentials_of_sentinels.get("sentinel_username"),
        sentinel_password=credentials_of_sentinels.get("sentinel_password"),
    )


def _host_port(part: str, shown: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` as a Sentinel's address."""
    if part.startswith("["):
        host, bracket, after = part[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            raise ValueError(f"The store URL {shown} has a malformed address {part!r}.")
        port_text = after[1:] if after else None
    elif part.count(":") > 1:
        raise ValueError(f"The store URL {shown} has an IPv6 address without brackets: {part!r}.")
    else:
        host, colon, port_text_or_empty = part.partition(":")
        port_text = port_text_or_empty if colon else None
    if not host:
        raise ValueError(f"The store URL {shown} has an address without a host: {part!r}.")
    if port_text is None:
        return host, SENTINEL_PORT
    if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
        raise ValueError(
            f"The store URL {shown} has the port {port_text!r} for {host}; a port is a number from 1 to 65535."
        )
    return host, int(port_text)
