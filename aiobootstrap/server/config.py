"""Server settings: one frozen value, built by the CLI or by a test."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from .._names import check_name, host_port
from ..store.url import check_store_url, describe, is_redis_url
from ..wire.routes import BATCH_QUERY_CHARS, DEFAULT_MAX_BODY_SIZE
from .tokens import TokenSet, is_token

__all__ = [
    "AUTH_READS",
    "DEFAULT_HOST",
    "DEFAULT_MAX_WAITERS",
    "DEFAULT_PORT",
    "DEFAULT_STORE",
    "NamespaceListener",
    "ServerConfig",
    "merge_settings",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6789
"""The port engines use for ``--engine-info-bootstrap-port``."""
DEFAULT_MAX_WAITERS = 65_536
"""Each parked wait holds a socket; the CLI lowers this to fit the open file limit."""
DEFAULT_STORE = "memory:"
AUTH_READS = ("token", "open")
"""What ``auth_reads`` may be: reads need a token, or anyone may read."""
_MIN_REQUEST_LINE = BATCH_QUERY_CHARS + 512
"""Room for the client's longest batch query plus the path and the other parameters."""

_S = TypeVar("_S")


@dataclass(frozen=True, slots=True)
class NamespaceListener:
    """Another listener, of one namespace (``--listen [HOST:]PORT=NAMESPACE``): its port's unprefixed routes
    are ``namespace``'s, as if every request were under ``/ns/NAMESPACE/`` on the main port.

    For the engines that name their server by ``host:port`` alone. ``port`` 0 lets the system choose;
    ``host`` ``None`` listens on the server's own ``host``.
    """

    port: int
    namespace: str
    host: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"{self}: the port must be between 0 and 65535, not {self.port}")
        try:
            check_name(self.namespace, "namespace")
        except ValueError as exc:
            raise ValueError(f"{self}: {exc}") from None
        if self.host is not None and not self.host.strip():
            raise ValueError(f"{self}: the host must be an address, not an empty string")

    @classmethod
    def parse(cls, spec: str) -> NamespaceListener:
        """``[HOST:]PORT=NAMESPACE`` (an IPv6 host in brackets: ``[::1]:7001=a``); ``ValueError`` saying what
        is wrong in one line."""
        address, equals, namespace = spec.rpartition("=")
        if not equals or not address:
            raise ValueError(f"{spec!r} is not [HOST:]PORT=NAMESPACE (a port, then = and a namespace)")
        if not namespace:
            raise ValueError(f"{spec!r} names no namespace: give [HOST:]PORT=NAMESPACE")
        host: str | None = None
        port = address
        if address.startswith("["):
            inside, bracket, rest = address[1:].partition("]")
            if not bracket or not rest.startswith(":"):
                raise ValueError(f"{spec!r}: write an IPv6 host as [HOST]:PORT=NAMESPACE")
            host, port = inside, rest[1:]
        elif ":" in address:
            host, _, port = address.rpartition(":")
            if ":" in host:
                raise ValueError(f"{spec!r}: write an IPv6 host in brackets, [HOST]:PORT=NAMESPACE")
        if not (port.isascii() and port.isdigit()):
            raise ValueError(f"{spec!r}: {port!r} is not a port number")
        if host is not None and not host:
            raise ValueError(f"{spec!r}: the host before ':' is empty (leave it out for --host's)")
        return cls(int(port), namespace, host)

    def address(self, default_host: str) -> tuple[str, int]:
        """The host and port to bind: the server's host (``default_host``) unless this listener names one."""
        return (default_host if self.host is None else self.host, self.port)

    def __str__(self) -> str:
        port = str(self.port) if self.host is None else host_port(self.host, self.port)
        return f"{port}={self.namespace}"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything the server needs to know; validated once, on creation."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    world_size: int | None = None
    """How many ranks exist; ranks outside ``[0, world_size)`` are refused."""
    max_wait: float = 300.0
    """The longest a get may wait, in seconds; longer asks are clamped to it."""
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    """The largest request body accepted, in bytes."""
    max_body_memory: int = 256 * 1024 * 1024
    """The most bytes of request bodies read at once, all requests together; past it a request gets
    503 with Retry-After before its body is read."""
    max_waiters: int | None = DEFAULT_MAX_WAITERS
    """How many waits may be parked at once; more get 503 with Retry-After; ``None`` for no limit."""
    max_namespaces: int = 1024
    """How many namespaces (the default one included) may hold records at once, counted in the store."""
    max_ranks: int | None = 65_536
    """How many distinct ranks one namespace may store when no world size is set; ``None`` for no limit."""
    max_roles: int | None = 256
    """How many distinct roles one namespace may store records of one kind under; ``None`` for no limit."""
    max_leases: int = 65_536
    """How many leases may be held at once, every namespace together; past it a grant is a ``409``."""
    max_request_line: int = 8190
    """The longest request line (method, path and query) accepted, in bytes."""
    max_header_size: int = 8190
    """The longest single header line accepted, in bytes."""
    max_connections: int | None = None
    """Most connections open at once; a new one past it closes the longest-idle connection
    (never one with a request in flight). ``None``: the open file limit less 128, found at start."""
    idle_timeout: float = 620.0
    """Seconds a connection may sit without a complete request head before it is closed."""
    body_timeout: float = 60.0
    """Seconds a request body may take to arrive in full."""
    auth_token: str | None = field(default=None, repr=False)
    """The bearer token every route but ``/health`` requires; ``None`` for no authentication.

    One token for everything: the same as ``auth_tokens=TokenSet.single(token)``."""
    auth_tokens: TokenSet | None = None
    """Tokens with scopes (namespaces, read-only), as a token file gives them; its repr shows none."""
    auth_reads: Literal["token", "open"] = "token"
    """``open``: anyone may read (gets, listings, ``/metrics``); writes still need a token whose scope
    covers them. ``token``: every route but the probes needs a token."""
    tls_cert: str | None = None
    """Path of the PEM certificate chain to serve HTTPS with (needs ``tls_key``)."""
    tls_key: str | None = None
    """Path of the PEM private key for ``tls_cert``."""
    shutdown_timeout: float = 1.0
    """Seconds a stopping server gives in-flight requests after waking its waiters."""
    access_log: bool = False
    """Log one line per request (logger ``aiohttp.access``); off, a deployment's gets would flood the log."""
    state_file: str | None = None
    """The journal that makes registrations survive a restart: the same as ``store="file:PATH"``."""
    store: str = DEFAULT_STORE
    """Where records live: ``memory:``, ``file:PATH``, ``redis://...``, ``rediss://...``, ``unix://...``."""
    store_prefix: str = "aiobootstrap"
    """The prefix of every key in a Redis store: several registries can share one Redis."""
    store_min_replicas: int = 0
    """How many Redis replicas must hold a write before it is acknowledged (``WAIT``); fewer in time is a 503."""
    watch_history: int = 100_000
    """Changes ``GET /watch`` keeps per namespace; an ``after`` older than them is a ``410``."""
    watch_history_memory: int = 256 * 1024 * 1024
    """Bytes the kept changes of all namespaces may cost together; past it the largest logs lose their oldest."""
    watch_ping: float = 15.0
    """Seconds between the comment lines a quiet ``/watch`` event stream sends (to keep proxies open)."""
    settings: tuple[Any, ...] = ()
    """The faces' settings, each an instance of a face's settings class (``Face.settings``), at most one
    of a class; a face whose settings are not given runs on its class's defaults (:meth:`settings_of`).
    Kept in a fixed order and without the ones equal to their defaults, so that configs that serve
    alike compare equal."""
    faces: tuple[str, ...] | None = None
    """The names of the faces to serve, of those installed (or given to ``create_app``); ``None``: all."""
    listen: tuple[NamespaceListener, ...] = ()
    """Further listeners, each serving one namespace's routes unprefixed (``--listen``); each its own port
    (0: the system's choice), none the main ``port``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", _kept_settings(self.settings))
        object.__setattr__(self, "listen", _listeners(self.listen, self.port))
        if self.faces is not None:
            object.__setattr__(self, "faces", _face_names(self.faces))
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be between 0 and 65535, not {self.port}")
        if self.world_size is not None and self.world_size < 1:
            raise ValueError(f"world size must be at least 1, not {self.world_size}")
        if not (math.isfinite(self.max_wait) and self.max_wait >= 0):
            raise ValueError(f"max wait must be a non-negative number of seconds, not {self.max_wait}")
        if self.max_body_size < 1:
            raise ValueError(f"max body size must be at least 1 byte, not {self.max_body_size}")
        if self.max_body_memory < self.max_body_size:
            raise ValueError(
                f"max body memory ({self.max_body_memory} bytes) must be at least the max body size "
                f"({self.max_body_size} bytes), or the largest body could never be read"
            )
        if self.max_namespaces < 1:
            raise ValueError(f"max namespaces must be at least 1, not {self.max_namespaces}")
        if self.state_file is not None and not self.state_file.strip():
            raise ValueError("state file must be a path, not an empty string")
        if self.state_file is not None and self.store != DEFAULT_STORE:
            raise ValueError(
                "give either a state file or a store, not both (a state file is the store file:PATH)"
            )
        check_store_url(self.store)
        check_name(self.store_prefix, "store prefix")
        if self.store_min_replicas < 0:
            raise ValueError(f"store min replicas must be non-negative, not {self.store_min_replicas}")
        if self.store_min_replicas and not is_redis_url(self.store_url):
            raise ValueError(
                f"--store-min-replicas {self.store_min_replicas} needs a Redis store (redis://, "
                f"redis+sentinel://...), not {describe(self.store_url)}"
            )
        if self.max_waiters is not None and self.max_waiters < 0:
            raise ValueError(f"max waiters must be non-negative, not {self.max_waiters}")
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError(f"max connections must be at least 1, not {self.max_connections}")
        if self.max_ranks is not None and self.max_ranks < 1:
            raise ValueError(f"max ranks must be at least 1, not {self.max_ranks}")
        if self.max_roles is not None and self.max_roles < 1:
            raise ValueError(f"max roles must be at least 1, not {self.max_roles}")
        if self.max_leases < 1:
            raise ValueError(f"max leases must be at least 1, not {self.max_leases}")
        if self.max_request_line < _MIN_REQUEST_LINE:
            raise ValueError(
                f"max request line must be at least {_MIN_REQUEST_LINE} bytes (the client's batch "
                f"requests need it), not {self.max_request_line}"
            )
        if self.watch_history < 1:
            raise ValueError(f"watch history must keep at least 1 change, not {self.watch_history}")
        if self.watch_history_memory < 1:
            raise ValueError(f"watch history memory must be at least 1 byte, not {self.watch_history_memory}")
        if not (math.isfinite(self.watch_ping) and self.watch_ping > 0):
            raise ValueError(f"watch ping must be a positive number of seconds, not {self.watch_ping}")
        if self.max_header_size < 1024:
            raise ValueError(f"max header size must be at least 1024 bytes, not {self.max_header_size}")
        for name in ("idle_timeout", "body_timeout"):
            seconds = getattr(self, name)
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(
                    f"{name.replace('_', ' ')} must be a positive number of seconds, not {seconds}"
                )
        if self.auth_token is not None and not is_token(self.auth_token):
            raise ValueError("the auth token must be non-empty printable ASCII without spaces")
        if self.auth_token is not None and self.auth_tokens is not None:
            raise ValueError("give either an auth token or a set of auth tokens, not both")
        if self.auth_reads not in AUTH_READS:
            raise ValueError(f"auth reads must be one of {', '.join(AUTH_READS)}, not {self.auth_reads!r}")
        if self.auth_reads == "open" and self.tokens is None:
            raise ValueError(
                "open reads (--auth-reads open) protect writes with a token: give one "
                "(--auth-token-file or AIOBOOTSTRAP_AUTH_TOKEN), or every route stays open"
            )
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both a certificate and a key (--tls-cert and --tls-key)")

    def settings_of(self, kind: type[_S]) -> _S:
        """The settings of class ``kind`` this config holds, else that class's defaults (``kind()``)."""
        for settings in self.settings:
            if type(settings) is kind:
                return settings
        return kind()

    def with_settings(self, *settings: object) -> ServerConfig:
        """This config with ``settings`` in place of those of the same class it holds."""
        return replace(self, settings=merge_settings(self.settings, settings))

    @property
    def tokens(self) -> TokenSet | None:
        """The tokens the server starts with: ``auth_tokens``, or ``auth_token`` alone; ``None``: no auth."""
        if self.auth_token is not None:
            return TokenSet.single(self.auth_token)
        return self.auth_tokens

    @property
    def store_url(self) -> str:
        """The store to open: ``store``, or ``file:PATH`` for a state file."""
        return self.store if self.state_file is None else f"file:{self.state_file}"

    @property
    def scheme(self) -> str:
        return "http" if self.tls_cert is None else "https"


def merge_settings(held: Iterable[object], new: Iterable[object]) -> tuple[object, ...]:
    """``held`` with each of ``new`` in place of the one of its class (or added)."""
    merged = {type(settings): settings for settings in held}
    merged.update((type(settings), settings) for settings in new)
    return tuple(merged.values())


def _kept_settings(given: Iterable[object]) -> tuple[object, ...]:
    """The faces' settings as a config keeps them: one of a class, those equal to their defaults left out,
    in the order of their classes' names."""
    if isinstance(given, (str, bytes)) or not isinstance(given, Iterable):
        raise ValueError(f"settings must be a tuple of the faces' settings, not {given!r}")
    by_class: dict[type, object] = {}
    for settings in given:
        kind = type(settings)
        if kind in by_class:
            raise ValueError(f"settings of {kind.__name__} are given twice")
        by_class[kind] = settings
    kept = [settings for kind, settings in by_class.items() if settings != kind()]
    return tuple(sorted(kept, key=lambda settings: (type(settings).__module__, type(settings).__qualname__)))


def _listeners(given: Iterable[NamespaceListener], main_port: int) -> tuple[NamespaceListener, ...]:
    """The listeners as a config keeps them: a tuple, each port (but 0) once, none the main port."""
    if isinstance(given, (str, bytes)) or not isinstance(given, Iterable):
        raise ValueError(f"listen must be a tuple of NamespaceListener, not {given!r}")
    listeners = tuple(given)
    taken = {main_port: "--port"} if main_port else {}
    for listener in listeners:
        if not isinstance(listener, NamespaceListener):
            raise ValueError(f"listen must hold NamespaceListener values, not {listener!r}")
        if listener.port in taken:
            raise ValueError(
                f"--listen {listener} takes port {listener.port}, which {taken[listener.port]} takes "
                "already: give each listener a port of its own"
            )
        if listener.port:
            taken[listener.port] = f"--listen {listener}"
    return listeners


def _face_names(given: Iterable[str]) -> tuple[str, ...]:
    if isinstance(given, str) or not isinstance(given, Iterable):
        raise ValueError(f"faces must be a tuple of face names, not {given!r}")
    names = tuple(given)
    for name in names:
        if not isinstance(name, str) or not name or "," in name or name != name.strip():
            raise ValueError(f"a face's name must be a non-empty word without commas, not {name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"faces must name each face once, not {', '.join(names)}")
    if not names:
        raise ValueError("faces must name at least one face (None serves them all)")
    return names
