"""aiobootstrap: a long-poll rendezvous server for the ranks of a distributed
inference engine, wire-compatible with the usual polling bootstrap server."""

from __future__ import annotations

__version__ = "0.1.0"

from ._app import create_app
from ._client import Backoff, BootstrapClient
from ._config import ServerConfig
from ._protocol import RankListing, RankSummary, TransferEngineInfo
from ._registry import MemoryStore, Record, RecordStore, Registry
from ._server import AddressInUse, BootstrapServer
from ._sync import SyncBootstrapClient
from ._threaded import ThreadedBootstrapServer
from .exceptions import (
    BadRequest,
    BootstrapError,
    NotRegistered,
    PayloadTooLarge,
    RankNotRegistered,
    ServerUnavailable,
    ShuttingDown,
    TooManyRanks,
    TooManyWaiters,
    Unauthorized,
)

__all__ = [
    "AddressInUse",
    "Backoff",
    "BadRequest",
    "BootstrapClient",
    "BootstrapError",
    "BootstrapServer",
    "MemoryStore",
    "NotRegistered",
    "PayloadTooLarge",
    "RankListing",
    "RankNotRegistered",
    "RankSummary",
    "Record",
    "RecordStore",
    "Registry",
    "ServerConfig",
    "ServerUnavailable",
    "ShuttingDown",
    "SyncBootstrapClient",
    "ThreadedBootstrapServer",
    "TooManyRanks",
    "TooManyWaiters",
    "TransferEngineInfo",
    "Unauthorized",
    "__version__",
    "create_app",
]
