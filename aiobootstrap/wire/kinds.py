"""What a client needs of each per-rank kind: its routes, its body field and its noun.

The server's record kinds (``server/kinds``) extend these with how a record is
checked, encoded and described; the client reads only this much.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._names import PARALLELISM_CONFIG, TRANSFER_ENGINE_INFO
from ..exceptions import ENGINE_INFO_NOUN
from .routes import (
    BATCH_PATH,
    CONFIG_BATCH_PATH,
    CONFIG_GET_PATH,
    CONFIG_REGISTER_PATH,
    GET_PATH,
    REGISTER_PATH,
)


@dataclass(frozen=True, slots=True)
class KindRoutes:
    """One kind of per-rank record as the wire names it."""

    name: str
    """The store's kind, the listing's ``kind=`` value."""
    noun: str
    """How the kind is named in sentences (``No {noun} for rank N``)."""
    field: str
    """The register body's field holding the record (beside ``rank``/``tp_rank`` and ``role``)."""
    register_path: str
    """``PUT`` registers; ``DELETE ?rank=N`` removes."""
    get_path: str
    batch_path: str
    batch_field: str
    """The batch reply's list of items."""


TRANSFER_ENGINE_INFO_ROUTES = KindRoutes(
    name=TRANSFER_ENGINE_INFO,
    noun=ENGINE_INFO_NOUN,
    field="transfer_engine_info",
    register_path=REGISTER_PATH,
    get_path=GET_PATH,
    batch_path=BATCH_PATH,
    batch_field="infos",
)

PARALLELISM_CONFIG_ROUTES = KindRoutes(
    name=PARALLELISM_CONFIG,
    noun="parallelism config",
    field="parallelism_config",
    register_path=CONFIG_REGISTER_PATH,
    get_path=CONFIG_GET_PATH,
    batch_path=CONFIG_BATCH_PATH,
    batch_field="configs",
)
