"""aiobootstrap: a long-poll rendezvous server for the ranks of a distributed
inference engine, wire-compatible with the usual polling bootstrap server.

The public names are imported on first use (PEP 562): ``python -m
aiobootstrap`` can then bind its port, and report a taken one, before aiohttp
is imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .exceptions import (
    AddressInUse,
    BadRequest,
    BootstrapError,
    LeaseNotFound,
    LeasesUnsupported,
    NotRegistered,
    PayloadTooLarge,
    RankNotRegistered,
    ServerUnavailable,
    ShuttingDown,
    StateFileError,
    StoreUnavailable,
    TooManyLeases,
    TooManyNamespaces,
    TooManyRanks,
    TooManyWaiters,
    Unauthorized,
    UnexpectedReply,
)

if TYPE_CHECKING:
    from ._registry import Registry
    from .client.client import BootstrapClient
    from .client.retry import Backoff
    from .client.sync import SyncBootstrapClient
    from .server.app import create_app
    from .server.config import ServerConfig
    from .server.server import BootstrapServer
    from .server.threaded import ThreadedBootstrapServer
    from .store import Key, MemoryStore, Record, Store
    from .wire import EncoderUrls, ParallelismConfig, RankListing, RankSummary, TransferEngineInfo

_LAZY = {
    "create_app": ".server.app",
    "Backoff": ".client.retry",
    "BootstrapClient": ".client.client",
    "ServerConfig": ".server.config",
    "EncoderUrls": ".wire",
    "ParallelismConfig": ".wire",
    "RankListing": ".wire",
    "RankSummary": ".wire",
    "TransferEngineInfo": ".wire",
    "Key": ".store",
    "MemoryStore": ".store",
    "Record": ".store",
    "Store": ".store",
    "Registry": "._registry",
    "BootstrapServer": ".server.server",
    "SyncBootstrapClient": ".client.sync",
    "ThreadedBootstrapServer": ".server.threaded",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "AddressInUse",
    "Backoff",
    "BadRequest",
    "BootstrapClient",
    "BootstrapError",
    "BootstrapServer",
    "EncoderUrls",
    "Key",
    "LeaseNotFound",
    "LeasesUnsupported",
    "MemoryStore",
    "NotRegistered",
    "ParallelismConfig",
    "PayloadTooLarge",
    "RankListing",
    "RankNotRegistered",
    "RankSummary",
    "Record",
    "Registry",
    "ServerConfig",
    "ServerUnavailable",
    "ShuttingDown",
    "StateFileError",
    "Store",
    "StoreUnavailable",
    "SyncBootstrapClient",
    "ThreadedBootstrapServer",
    "TooManyLeases",
    "TooManyNamespaces",
    "TooManyRanks",
    "TooManyWaiters",
    "TransferEngineInfo",
    "Unauthorized",
    "UnexpectedReply",
    "__version__",
    "create_app",
]
