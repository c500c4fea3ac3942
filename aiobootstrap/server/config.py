"""Server settings: one frozen value, built by the CLI or by a test."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .._names import check_name
from ..store.url import check_store_url
from ..wire import BATCH_QUERY_CHARS

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_WAITERS",
    "DEFAULT_PORT",
    "DEFAULT_STORE",
    "ServerConfig",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6789
"""The port engines use for ``--engine-info-bootstrap-port``."""
DEFAULT_MAX_WAITERS = 65_536
"""Each parked wait holds a socket; the CLI lowers this to fit the open file limit."""
DEFAULT_STORE = "memory:"
_MIN_REQUEST_LINE = BATCH_QUERY_CHARS + 512
"""Room for the client's longest batch query plus the path and the other parameters."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything the server needs to know; validated once, on creation."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    world_size: int | None = None
    """How many ranks exist; ranks outside ``[0, world_size)`` are refused."""
    max_wait: float = 300.0
    """The longest a get may wait, in seconds; longer asks are clamped to it."""
    max_body_size: int = 64 * 1024 * 1024
    """The largest request body accepted, in bytes."""
    max_body_memory: int = 256 * 1024 * 1024
    """The most bytes of request bodies read at once, all requests together; past it a request gets
    503 with Retry-After before its body is read."""
    max_waiters: int | None = DEFAULT_MAX_WAITERS
    """How many waits may be parked at once; more get 503 with Retry-After; ``None`` for no limit."""
    max_namespaces: int = 1024
    """How many namespaces (the default one included) may hold ranks or waits at once."""
    max_ranks: int | None = 65_536
    """How many distinct ranks one namespace may store when no world size is set; ``None`` for no limit."""
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
    """The bearer token every route but ``/health`` requires; ``None`` for no authentication."""
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

    def __post_init__(self) -> None:
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
        if self.max_waiters is not None and self.max_waiters < 0:
            raise ValueError(f"max waiters must be non-negative, not {self.max_waiters}")
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError(f"max connections must be at least 1, not {self.max_connections}")
        if self.max_ranks is not None and self.max_ranks < 1:
            raise ValueError(f"max ranks must be at least 1, not {self.max_ranks}")
        if self.max_leases < 1:
            raise ValueError(f"max leases must be at least 1, not {self.max_leases}")
        if self.max_request_line < _MIN_REQUEST_LINE:
            raise ValueError(
                f"max request line must be at least {_MIN_REQUEST_LINE} bytes (the client's batch "
                f"requests need it), not {self.max_request_line}"
            )
        if self.max_header_size < 1024:
            raise ValueError(f"max header size must be at least 1024 bytes, not {self.max_header_size}")
        for name in ("idle_timeout", "body_timeout"):
            seconds = getattr(self, name)
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(
                    f"{name.replace('_', ' ')} must be a positive number of seconds, not {seconds}"
                )
        if self.auth_token is not None and not _is_token(self.auth_token):
            raise ValueError("the auth token must be non-empty printable ASCII without spaces")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both a certificate and a key (--tls-cert and --tls-key)")

    @property
    def store_url(self) -> str:
        """The store to open: ``store``, or ``file:PATH`` for a state file."""
        return self.store if self.state_file is None else f"file:{self.state_file}"

    @property
    def scheme(self) -> str:
        return "http" if self.tls_cert is None else "https"


def _is_token(text: str) -> bool:
    # It travels in an Authorization header: visible ASCII only, no spaces.
    return bool(text) and text.isascii() and text.isprintable() and not any(c.isspace() for c in text)
