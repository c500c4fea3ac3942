"""The server hosted in a daemon thread, for engines that are not asyncio programs.

Engines today start a bootstrap server in a thread of their own process and
read it in-process; :class:`ThreadedBootstrapServer` is the drop-in for that.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any, TypeVar

from .. import _json
from .._loopthread import LoopThread, LoopThreadOwner
from .._names import DEFAULT_NAMESPACE, DEFAULT_ROLE, PARALLELISM_CONFIG, TRANSFER_ENGINE_INFO
from ..core.registry import Registry
from ..store import Key, Record
from .config import DEFAULT_HOST, DEFAULT_PORT
from .faces.kinds import encoder_list_key, encoder_urls
from .server import BootstrapServer
from .tokens import TokenSet

_T = TypeVar("_T")
_V = TypeVar("_V")

__all__ = ["ThreadedBootstrapServer"]


class ThreadedBootstrapServer(LoopThreadOwner):
    """An aiobootstrap server on its own event loop, in a daemon thread.

    ::

        server = ThreadedBootstrapServer("0.0.0.0", 6789, world_size=8)
        ...
        server.get_transfer_engine_info(3)   # (session_id, weights_info_dict) or None
        server.get_parallelism_config_info(3)  # the config dict or None
        server.get_encoder_urls()            # ["http://...", ...]
        server.close()

    The constructor returns once the server listens; a port that is taken
    raises :class:`AddressInUse` here, in the caller's thread. Keyword
    arguments are :class:`ServerConfig` fields (``auth_tokens=TokenSet(...)``
    and ``auth_reads="open"`` among them, as for :class:`BootstrapServer`).
    """

    _open_state = "listening"

    def __init__(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, **options: Any) -> None:
        self._server = BootstrapServer(host=host, port=port, **options)
        self._loop_thread = LoopThread(f"aiobootstrap server {host}:{port}")
        try:
            self._loop_thread.run(self._server.start())
        except BaseException:
            self._loop_thread.close()
            raise
        self._registry = self._server.registry

    def close(self) -> None:
        """Answer parked waits with 503, stop listening and join the thread; idempotent."""
        self._loop_thread.close(self._server.close)

    def rotate_tokens(self, tokens: TokenSet) -> None:
        """Put ``tokens`` in force at once, from any thread (see :meth:`BootstrapServer.rotate_tokens`)."""

        async def rotate() -> None:
            self._server.rotate_tokens(tokens)

        self._loop_thread.run(rotate())

    @property
    def host(self) -> str:
        return self._server.host

    @property
    def port(self) -> int:
        """The port listened on: the real one when ``port=0`` asked the system to choose."""
        return self._server.port

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def parked(self) -> int:
        """How many get requests are waiting right now, in the default namespace."""
        return self._registry.parked

    @property
    def transfer_engine_info(self) -> Mapping[int, tuple[str, dict[str, Any]]]:
        """A live, read-only ``{rank: (session_id, weights_info_dict)}``.

        The mapping engines' own bootstrap servers expose under this name.
        """
        return _RankView(self, TRANSFER_ENGINE_INFO, self.get_transfer_engine_info)

    @property
    def parallelism_config(self) -> Mapping[int, dict[str, Any]]:
        """A live, read-only ``{rank: parallelism_config}`` of the default namespace's target role.

        The mapping engines read on their own bootstrap server under this name
        (``server.parallelism_config[rank]``), beside :attr:`transfer_engine_info`.
        """
        return _RankView(self, PARALLELISM_CONFIG, self.get_parallelism_config_info)

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
        info = _copy(record.value)
        return info.get("session_id", ""), info.get("weights_info_dict", {})

    def get_transfer_engine_info_object(
        self, rank: int, *, role: str = DEFAULT_ROLE
    ) -> dict[str, Any] | None:
        """``rank``'s transfer-engine info whole, as registered (a tagged backend's fields too), or ``None``."""
        record = self._record(Key(DEFAULT_NAMESPACE, TRANSFER_ENGINE_INFO, role, rank))
        return None if record is None else _copy(record.value)

    def get_parallelism_config_info(self, rank: int, *, role: str = DEFAULT_ROLE) -> dict[str, Any] | None:
        """``rank``'s parallelism config in the default namespace, as registered, or ``None``.

        Read in-process like :meth:`get_transfer_engine_info`; the dict is the caller's own copy.
        """
        record = self._record(Key(DEFAULT_NAMESPACE, PARALLELISM_CONFIG, role, rank))
        return None if record is None else _copy(record.value)

    def get_encoder_urls(self) -> list[str]:
        """The encoder URLs of the default namespace, in order of first registration (a new list)."""
        return list(encoder_urls(self._record(encoder_list_key(DEFAULT_NAMESPACE))))

    def _record(self, key: Key) -> Record | None:
        return self._read(lambda registry: registry.peek(key), lambda registry: registry.get(key))

    def _records(self, kind: str) -> list[Record]:
        key = Key(DEFAULT_NAMESPACE, kind, DEFAULT_ROLE, 0)
        return self._read(
            lambda registry: registry.peek_records(key.namespace, key.kind, key.role),
            lambda registry: registry.records(key.namespace, key.kind, key.role),
        )

    def _read(
        self,
        local: Callable[[Registry], _T],
        shared: Callable[[Registry], Coroutine[Any, Any, _T]],
    ) -> _T:
        # A store in this process is read across threads without the loop (see
        # Registry.peek), also after close; a shared one through the server's loop.
        registry = self._registry
        if registry.peeks:
            return local(registry)
        return self._loop_thread.run(shared(registry))


def _copy(value: dict[str, Any]) -> dict[str, Any]:
    """The caller's own copy of a stored value: what a remote getter would decode."""
    copied: dict[str, Any] = _json.loads(_json.dumps(value))
    return copied


class _RankView(Mapping[int, _V]):
    """A kind's records of the default namespace's target role, by rank, read afresh at each use."""

    def __init__(self, server: ThreadedBootstrapServer, kind: str, read: Callable[[int], _V | None]) -> None:
        self._server = server
        self._kind = kind
        self._read = read

    def __getitem__(self, rank: int) -> _V:
        value = self._read(rank)
        if value is None:
            raise KeyError(rank)
        return value

    def __iter__(self) -> Iterator[int]:
        return iter([record.rank for record in self._server._records(self._kind)])

    def __len__(self) -> int:
        return len(self._server._records(self._kind))
