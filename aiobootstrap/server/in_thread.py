"""A server hosted in a daemon thread and read in-process: what every engine's drop-in class stands on.

Engines start their bootstrap server in a thread of their own process and
read it in-process. :class:`ServerInThread` is that for any face: a
:class:`BootstrapServer` on its own event loop in a daemon thread, listening
when the constructor returns, with reads of its records from the caller's
thread. It names no engine: what an engine reads (its kinds, its shapes)
is its face's in-process class, built on this one (``faces/<name>/inprocess.py``,
and ``threaded.ThreadedBootstrapServer``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any, TypeVar

from .. import _json
from .._loopthread import LoopThread, LoopThreadOwner
from .._names import DEFAULT_NAMESPACE, DEFAULT_ROLE
from ..core.registry import Registry
from ..store import Key, Record
from .config import DEFAULT_HOST, DEFAULT_PORT
from .server import BootstrapServer
from .tokens import TokenSet

_T = TypeVar("_T")
_V = TypeVar("_V")

__all__ = ["RankView", "ServerInThread", "copy_value"]


class ServerInThread(LoopThreadOwner):
    """An aiobootstrap server on its own event loop, in a daemon thread, read in-process.

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

    # -- reads in-process, for the faces' classes -----------------------------

    def _record(self, key: Key) -> Record | None:
        """``key``'s record, or ``None``: read from any thread, also after :meth:`close`."""
        return self._read(lambda registry: registry.peek(key), lambda registry: registry.get(key))

    def _records(self, kind: str, role: str = DEFAULT_ROLE) -> list[Record]:
        """The default namespace's records of ``kind`` and ``role``, read as :meth:`_record` reads."""
        return self._read(
            lambda registry: registry.peek_records(DEFAULT_NAMESPACE, kind, role),
            lambda registry: registry.records(DEFAULT_NAMESPACE, kind, role),
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


def copy_value(value: dict[str, Any]) -> dict[str, Any]:
    """The caller's own copy of a stored value: what a remote getter would decode."""
    copied: dict[str, Any] = _json.loads(_json.dumps(value))
    return copied


class RankView(Mapping[int, _V]):
    """A kind's records of the default namespace's target role, by rank, read afresh at each use."""

    def __init__(self, server: ServerInThread, kind: str, read: Callable[[int], _V | None]) -> None:
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
