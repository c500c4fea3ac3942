"""vLLM's in-process bootstrap server: ``VllmBootstrapServer(host, port)`` in place of vLLM's
``MooncakeBootstrapServer(vllm_config, host, port)``, which the first prefill worker starts in a thread
(``start()``, ``shutdown()``, ``workers``)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ....wire.vllm import VLLM_WORKER, Engine
from ...config import DEFAULT_HOST
from ...in_thread import ServerInThread
from .settings import default_port
from .workers import current

__all__ = ["VllmBootstrapServer"]


class VllmBootstrapServer:
    """A drop-in for vLLM's ``MooncakeBootstrapServer``: the whole aiobootstrap server in a daemon thread.

    ::

        server = VllmBootstrapServer("0.0.0.0", 8998)   # or vLLM's (vllm_config, host, port)
        server.start()                                  # listening when it returns; a taken port: OSError
        server.workers                                  # {dp_rank: Engine(engine_id, worker_addr)}, read-only
        server.shutdown()                               # stops, frees the port

    The port defaults to ``VLLM_MOONCAKE_BOOTSTRAP_PORT``, as vLLM reads it
    (8998); ``port=0`` lets the system choose, and :attr:`port` says which
    after :meth:`start`. It serves ``/register`` and ``/query`` as vLLM's
    server does (and every other route of aiobootstrap's). A taken port raises
    :class:`~aiobootstrap.exceptions.AddressInUse`, an ``OSError``, from
    :meth:`start`, in the caller's thread. Keyword arguments are
    :class:`ServerConfig` fields or a face's setting (``vllm_probe_interval=5``).
    """

    def __init__(self, *args: Any, **options: Any) -> None:
        if len(args) == 3:
            args = args[1:]  # vLLM's (vllm_config, host, port): its config says nothing the server needs
        if len(args) > 2:
            raise TypeError(
                f"VllmBootstrapServer takes (host, port) or (vllm_config, host, port), not {len(args)} arguments"
            )
        host = args[0] if args else options.pop("host", DEFAULT_HOST)
        port = args[1] if len(args) > 1 else options.pop("port", None)
        options.pop("vllm_config", None)
        self.host: str = host
        self._port: int = default_port(os.environ) if port is None else int(port)
        self._options = options
        self._server: ServerInThread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Listen and serve in a daemon thread; a second call does nothing. A taken port: ``AddressInUse``."""
        with self._lock:
            if self._server is None:
                self._server = ServerInThread(self.host, self._port, **self._options)

    def shutdown(self) -> None:
        """Answer parked waits, stop listening and join the thread; the port is free when it returns."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.shutdown()

    @property
    def port(self) -> int:
        """The port listened on (the system's choice after a ``port=0`` start), else the one asked."""
        server = self._server
        return self._port if server is None else server.port

    @property
    def url(self) -> str:
        server = self._server
        return f"http://{self.host}:{self.port}" if server is None else server.url

    @property
    def workers(self) -> Mapping[int, Engine]:
        """The default namespace's workers as ``/query`` shows them, by dp rank: each dp rank's engine and
        its workers' addresses by tp rank, then pp rank (vLLM's ``EngineEntry`` fields); a read-only view,
        read afresh at each use ({} before :meth:`start`)."""
        server = self._server
        if server is None:
            return MappingProxyType({})
        engines: dict[int, Engine] = {}
        for worker in sorted(
            current(server._records(VLLM_WORKER)), key=lambda w: (w.dp_rank, w.tp_rank, w.pp_rank)
        ):
            engine = engines.setdefault(worker.dp_rank, Engine(worker.engine_id, {}))
            engine.worker_addr.setdefault(worker.tp_rank, {})[worker.pp_rank] = worker.addr
        return MappingProxyType(dict(sorted(engines.items())))
