"""``etcd://`` store URLs: ``etcd://[user:password@]host:port[,host:port...][?prefix=NAME]``, ``etcds://`` (TLS,
``&cacert=PATH`` for a private CA).

A leaf of the store, as ``sentinel_url`` is: the URL parser checks a URL
without aetcd installed, and the etcd store reads its parts from here. A
URL that names no cluster is a one-line :class:`ValueError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote

from .._names import check_name
from .redacted import describe

__all__ = ["ETCD_SCHEMES", "EtcdTarget", "parse_etcd_url"]

ETCD_SCHEMES = ("etcd", "etcds")
DEFAULT_PORT = 2379


@dataclass(frozen=True, slots=True)
class EtcdTarget:
    """What an etcd URL names."""

    endpoints: list[tuple[str, int]]
    tls: bool
    username: str | None
    password: str | None
    prefix: str | None
    """``?prefix=NAME``; ``None``: the store's prefix (``--store-prefix``)."""
    cacert: str | None = None
    """``?cacert=PATH`` (``etcds://`` only): the CAs to trust, as etcdctl's ``--cacert``; else the system's."""


def parse_etcd_url(url: str) -> EtcdTarget:
    """The cluster ``url`` names; ``ValueError`` (one line, no password) when it names none."""
    shown = describe(url)
    usage = "use etcd://[user:password@]host:port[,host:port...][?prefix=NAME]"
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ETCD_SCHEMES:
        raise ValueError(f"The store URL {shown} is malformed: {usage}.")
    rest, _, query = rest.partition("?")
    rest, _, fragment = rest.partition("#")
    netloc, slash, path = rest.partition("/")
    if path.strip("/") or fragment:
        raise ValueError(f"The store URL {shown} has a path; {usage}.")
    del slash
    username = password = None
    if "@" in netloc:
        credentials, _, netloc = netloc.rpartition("@")
        user, colon, secret = credentials.partition(":")
        if not colon or not user:
            raise ValueError(f"The store URL {shown} has credentials without user:password; {usage}.")
        username, password = unquote(user), unquote(secret)
    if not netloc:
        raise ValueError(f"The store URL {shown} names no host; {usage}.")
    endpoints = [_endpoint(part, shown, usage) for part in netloc.split(",")]
    prefix = None
    options = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - {"prefix", "cacert"})
    if unknown:
        raise ValueError(f"The store URL {shown} has an unknown option {unknown[0]!r}; {usage}.")
    if "prefix" in options:
        prefix = options["prefix"][-1]
        try:
            check_name(prefix, "store prefix")
        except ValueError as exc:
            raise ValueError(f"The store URL {shown} has a bad prefix: {exc}") from None
    cacert = options["cacert"][-1] if "cacert" in options else None
    if cacert is not None and (scheme != "etcds" or not cacert):
        raise ValueError(f"The store URL {shown}: cacert= names a CA file, for etcds:// only.")
    return EtcdTarget(endpoints, scheme == "etcds", username, password, prefix, cacert)


def _endpoint(part: str, shown: str, usage: str) -> tuple[str, int]:
    host, colon, port_text = part.rpartition(":") if part.count(":") == 1 or "]" in part else (part, "", "")
    if not colon:
        host, port_text = part, str(DEFAULT_PORT)
    host = host.strip("[]")
    if not host:
        raise ValueError(f"The store URL {shown} has an endpoint without a host ({part!r}); {usage}.")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"The store URL {shown} has a bad port {port_text!r}; a port is 1 to 65535.")
    return host, int(port_text)
