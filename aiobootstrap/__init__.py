"""aiobootstrap: a long-poll rendezvous server for the ranks of a distributed
inference engine, wire-compatible with the usual polling bootstrap server.

The public names are imported on first use (PEP 562): ``python -m
aiobootstrap`` can then bind its port, and report a taken one, before aiohttp
is imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from .exceptions import (
    AddressInUse,
    BadRequest,
    BootstrapError,
    NotRegistered,
    PayloadTooLarge,
    RankNotRegistered,
    ServerUnavailable,
    ShuttingDown,
    StateFileError,
    StoreUnavailable,
    TooManyNamespaces,
    TooManyRanks,
    TooManyWaiters,
    Unauthorized,
    UnexpectedReply,
)

if TYPE_CHECKING:
    from ._app import create_app
    from ._client import BootstrapClient
    from ._config import ServerConfig
    from ._protocol import EncoderUrls, ParallelismConfig, RankListing, RankSummary, TransferEngineInfo
    from ._registry import Registry
    from ._retry import Backoff
    from ._server import BootstrapServer
    from ._sync import SyncBootstrapClient
    from ._threaded import ThreadedBootstrapServer
    from .store import Key, MemoryStore, Record, Store

_LAZY = {
    "create_app": "._app",
    "Backoff": "._retry",
    "BootstrapClient": "._client",
    "ServerConfig": "._config",
    "EncoderUrls": "._protocol",
    "ParallelismConfig": "._protocol",
    "RankListing": "._protocol",
    "RankSummary": "._protocol",
    "TransferEngineInfo": "._protocol",
    "Key": ".store",
    "MemoryStore": ".store",
    "Record": ".store",
    "Store": ".store",
    "Registry": "._registry",
    "BootstrapServer": "._server",
    "SyncBootstrapClient": "._sync",
    "ThreadedBootstrapServer": "._threaded",
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
    "TooManyNamespaces",
    "TooManyRanks",
    "TooManyWaiters",
    "TransferEngineInfo",
    "Unauthorized",
    "UnexpectedReply",
    "__version__",
    "create_app",
]
