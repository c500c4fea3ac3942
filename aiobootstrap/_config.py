"""Server settings: one frozen value, built by the CLI or by a test."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ServerConfig"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6789
"""The port engines use for ``--engine-info-bootstrap-port``."""


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
    max_waiters: int | None = None
    """How many waits may be parked at once; ``None`` for no limit."""
    max_namespaces: int = 1024
    """How many namespaces (the default one included) may hold ranks or waits at once."""
    shutdown_timeout: float = 1.0
    """Seconds a stopping server gives in-flight requests after waking its waiters."""
    access_log: bool = False
    """Log one line per request (logger ``aiohttp.access``); off, a deployment's gets would flood the log."""
    state_file: str | None = None
    """The journal that makes registrations survive a restart; ``None`` keeps them in memory only."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be between 0 and 65535, not {self.port}")
        if self.world_size is not None and self.world_size < 1:
            raise ValueError(f"world size must be at least 1, not {self.world_size}")
        if not (math.isfinite(self.max_wait) and self.max_wait >= 0):
            raise ValueError(f"max wait must be a non-negative number of seconds, not {self.max_wait}")
        if self.max_body_size < 1:
            raise ValueError(f"max body size must be at least 1 byte, not {self.max_body_size}")
        if self.max_namespaces < 1:
            raise ValueError(f"max namespaces must be at least 1, not {self.max_namespaces}")
        if self.state_file is not None and not self.state_file.strip():
            raise ValueError("state file must be a path, not an empty string")
        if self.max_waiters is not None and self.max_waiters < 0:
            raise ValueError(f"max waiters must be non-negative, not {self.max_waiters}")
