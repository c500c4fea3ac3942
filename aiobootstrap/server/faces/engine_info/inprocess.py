"""The engine-info face's reads in-process: each rank's transfer-engine info and parallelism config, read
from the engine's own thread on the server it hosts (``ThreadedBootstrapServer`` is built on them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...._names import DEFAULT_NAMESPACE, DEFAULT_ROLE, PARALLELISM_CONFIG, TRANSFER_ENGINE_INFO
from ....store import Key
from ...in_thread import RankView, ServerInThread, copy_value

__all__ = ["EngineInfoReads"]


class EngineInfoReads(ServerInThread):
    """A server in a thread with the engine-info reads engines make of their own bootstrap server.

    ::

        server.get_transfer_engine_info(3)     # (session_id, weights_info_dict) or None
        server.get_parallelism_config_info(3)  # the config dict or None
        server.transfer_engine_info[3]         # a live, read-only mapping by rank
    """

    @property
    def transfer_engine_info(self) -> Mapping[int, tuple[str, dict[str, Any]]]:
        """A live, read-only ``{rank: (session_id, weights_info_dict)}``.

        The mapping engines' own bootstrap servers expose under this name.
        """
        return RankView(self, TRANSFER_ENGINE_INFO, self.get_transfer_engine_info)

    @property
    def parallelism_config(self) -> Mapping[int, dict[str, Any]]:
        """A live, read-only ``{rank: parallelism_config}`` of the default namespace's target role.

        The mapping engines read on their own bootstrap server under this name
        (``server.parallelism_config[rank]``), beside :attr:`transfer_engine_info`.
        """
        return RankView(self, PARALLELISM_CONFIG, self.get_parallelism_config_info)

    def get_transfer_engine_info(self, rank: int) -> tuple[str, dict[str, Any]] | None:
        """``rank``'s ``(session_id, weights_info_dict)`` in the default namespace, or ``None``.

        A tagged backend's info without a session id reads ``("", weights_info_dict)``;
        :meth:`get_transfer_engine_info_object` reads it whole. Read in-process, without HTTP, from any thread, also after
        :meth:`close`; the dict is the caller's own copy, the same a remote
        getter receives.
        """
        record = self._record(Key(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, DEFAULT_ROLE, rank))
        if record is None:
            return None
        info = copy_value(record.value)
        return info.get("session_id", ""), info.get("weights_info_dict", {})

    def get_transfer_engine_info_object(
        self, rank: int, *, role: str = DEFAULT_ROLE
    ) -> dict[str, Any] | None:
        """``rank``'s transfer-engine info whole, as registered (a tagged backend's fields too), or ``None``."""
        record = self._record(Key(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, role, rank))
        return None if record is None else copy_value(record.value)

    def get_parallelism_config_info(self, rank: int, *, role: str = DEFAULT_ROLE) -> dict[str, Any] | None:
        """``rank``'s parallelism config in the default namespace, as registered, or ``None``.

        Read in-process like :meth:`get_transfer_engine_info`; the dict is the caller's own copy.
        """
        record = self._record(Key(DEFAULT_NAMESPACE, PARALLELISM_CONFIG, role, rank))
        return None if record is None else copy_value(record.value)
