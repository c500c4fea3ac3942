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
    Forbidden,
    HistoryGone,
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
    TopologyConflict,
    Unauthorized,
    UnexpectedReply,
)

if TYPE_CHECKING:
    from .client.client import BootstrapClient
    from .client.retry import Backoff
    from .client.sync import SyncBootstrapClient
    from .core.registry import Registry
    from .server.app import create_app
    from .server.config import NamespaceListener, ServerConfig
    from .server.faces.encoders.inprocess import EncoderBootstrapServer
    from .server.faces.prefill.inprocess import PrefillBootstrapServer
    from .server.faces.vllm.inprocess import VllmBootstrapServer
    from .server.server import BootstrapServer
    from .server.threaded import ThreadedBootstrapServer
    from .server.tokens import Scope, TokenSet
    from .store import Key, MemoryStore, Record, Store
    from .wire.encoder_health import EncoderHealthReport, EncoderUrlHealth
    from .wire.results import (
        EncoderUrls,
        NamespaceSummary,
        ParallelismConfig,
        RankListing,
        RankSummary,
        TransferEngineInfo,
    )
    from .wire.watch import WatchedChange

_LAZY = {
    "create_app": ".server.app",
    "Backoff": ".client.retry",
    "BootstrapClient": ".client.client",
    "ServerConfig": ".server.config",
    "NamespaceListener": ".server.config",
    "EncoderHealthReport": ".wire.encoder_health",
    "EncoderUrlHealth": ".wire.encoder_health",
    "EncoderUrls": ".wire.results",
    "ParallelismConfig": ".wire.results",
    "RankListing": ".wire.results",
    "RankSummary": ".wire.results",
    "NamespaceSummary": ".wire.results",
    "TransferEngineInfo": ".wire.results",
    "WatchedChange": ".wire.watch",
    "Key": ".store",
    "MemoryStore": ".store",
    "Record": ".store",
    "Store": ".store",
    "Registry": ".core.registry",
    "BootstrapServer": ".server.server",
    "SyncBootstrapClient": ".client.sync",
    "ThreadedBootstrapServer": ".server.threaded",
    "Scope": ".server.tokens",
    "TokenSet": ".server.tokens",
    "EncoderBootstrapServer": ".server.faces.encoders.inprocess",
    "PrefillBootstrapServer": ".server.faces.prefill.inprocess",
    "VllmBootstrapServer": ".server.faces.vllm.inprocess",
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
    "EncoderBootstrapServer",
    "EncoderHealthReport",
    "EncoderUrlHealth",
    "EncoderUrls",
    "Forbidden",
    "HistoryGone",
    "Key",
    "LeaseNotFound",
    "LeasesUnsupported",
    "MemoryStore",
    "NamespaceListener",
    "NamespaceSummary",
    "NotRegistered",
    "ParallelismConfig",
    "PayloadTooLarge",
    "PrefillBootstrapServer",
    "RankListing",
    "RankNotRegistered",
    "RankSummary",
    "Record",
    "Registry",
    "Scope",
    "ServerConfig",
    "ServerUnavailable",
    "ShuttingDown",
    "StateFileError",
    "Store",
    "StoreUnavailable",
    "SyncBootstrapClient",
    "ThreadedBootstrapServer",
    "TokenSet",
    "TooManyLeases",
    "TooManyNamespaces",
    "TooManyRanks",
    "TooManyWaiters",
    "TopologyConflict",
    "TransferEngineInfo",
    "Unauthorized",
    "UnexpectedReply",
    "VllmBootstrapServer",
    "WatchedChange",
    "__version__",
    "create_app",
]
