"""The server hosted in a daemon thread, for engines that are not asyncio programs.

Engines today start a bootstrap server in a thread of their own process and
read it in-process; :class:`ThreadedBootstrapServer` is the drop-in for that.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from . import _protocol as protocol
from ._config import DEFAULT_HOST, DEFAULT_PORT
from ._loopthread import LoopThread
from ._server import BootstrapServer

__all__ = ["ThreadedBootstrapServer"]


class ThreadedBootstrapServer:
    """An aiobootstrap server on its own event loop, in a daemon thread.

    ::

        server = ThreadedBootstrapServer("0.0.0.0", 6789, world_size=8)
        ...
        server.get_transfer_engine_info(3)   # (session_id, weights_info_dict) or None
        server.close()

    The constructor returns once the server listens; a port that is taken
    raises :class:`AddressInUse` here, in the caller's thread. Keyword
    arguments are :class:`ServerConfig` fields.
    """

    def __init__(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, **options: Any) -> None:
        self._server = BootstrapServer(host=host, port=port, **options)
        self._loop_thread = LoopThread(f"aiobootstrap server {host}:{port}")
        try:
            self._loop_thread.run(self._server.start())
        except BaseException:
            self._loop_thread.close()
            raise

    def __enter__(self) -> ThreadedBootstrapServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._loop_thread.closed else "listening"
        return f"<ThreadedBootstrapServer {self.url} {state}>"

    def close(self) -> None:
        """Answer parked waits with 503, stop listening and join the thread; idempotent."""
        self._loop_thread.close(self._server.close)

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
        """How many get requests are waiting right now."""
        # One int attribute read: atomic, so it needs no trip through the loop.
        return self._server.registry.parked

    def get_transfer_engine_info(self, rank: int) -> tuple[str, dict[str, Any]] | None:
        """``rank``'s ``(session_id, weights_info_dict)``, or ``None`` if it has not registered.

        Read in-process, without HTTP; the dict is the caller's own copy, the
        same a remote getter receives.
        """
        reply = self._loop_thread.run(self._reply(rank))
        if reply is None:
            return None
        info = protocol.decode_info(protocol.loads(reply))
        return info.session_id, info.weights_info_dict

    async def _reply(self, rank: int) -> bytes | None:
        # Read on the server's loop, so any record store is only ever touched
        # from the thread that writes it.
        record = self._server.registry.get(rank)
        return None if record is None else record.reply
