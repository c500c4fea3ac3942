"""The server hosted in a daemon thread, for engines that are not asyncio programs: SGLang's drop-in.

Engines today start a bootstrap server in a thread of their own process and
read it in-process; :class:`ThreadedBootstrapServer` is the drop-in for that.
The thread and the reads are ``in_thread.ServerInThread``'s, which names no
engine; the engine-info reads are that face's (``faces/engine_info/inprocess.py``),
the encoder list is read by the encoder face's key.
"""

from __future__ import annotations

from .._names import DEFAULT_NAMESPACE
from .faces.encoders.keys import encoder_list_key, encoder_urls
from .faces.engine_info.inprocess import EngineInfoReads

__all__ = ["ThreadedBootstrapServer"]


class ThreadedBootstrapServer(EngineInfoReads):
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

    def get_encoder_urls(self) -> list[str]:
        """The encoder URLs of the default namespace, in order of first registration (a new list)."""
        return list(encoder_urls(self._record(encoder_list_key(DEFAULT_NAMESPACE))))
